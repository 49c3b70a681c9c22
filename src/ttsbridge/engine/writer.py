"""The write path of a :class:`~ttsbridge.engine.connection.Connection` (modelled on websockets'
``asyncio/connection.py`` ``send``).

After a command, :meth:`Writer.write` writes what the protocol queued: framed by websockets' sans-I/O protocol
and written into the transport at once when it takes frames now (no await, no lock), else under one lock,
draining the transport's buffer between frames (so frames keep their order). Frames queued from a callback (a
frame received, the timer) are written by one writer task (:meth:`Writer.write_soon`), bounded by
``write_timeout``, errors swallowed (the protocol already knows).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from ttsbridge.engine.keepalive import Keepalive
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.socket import Socket
from ttsbridge.errors import TTSBridgeError, TTSConnectionError

__all__ = ["Writer"]


class Writer:
    """Writes ``protocol.data_to_send()`` into :attr:`socket` (set once the connection is open). ``lost()`` is
    called when a write finds the socket closing (the protocol is told before the error is raised)."""

    def __init__(
        self,
        protocol: TurnProtocol,
        keepalive: Keepalive,
        lost: Callable[[], None],
        clock: Callable[[], float],
        *,
        timeout: float,
        name: str = "",
    ) -> None:
        self._protocol = protocol
        self._keepalive = keepalive
        self._lost = lost
        self._clock = clock
        self.timeout = timeout
        self.name = name
        self.socket: Socket | None = None
        #: When a request was last written (the pool's idle clock starts here).
        self.last_used = clock()
        self._task: asyncio.Task[None] | None = None
        self._again = False  # a frame was queued while the writer task was under way (see write_soon)
        self._lock = asyncio.Lock()

    def writable(self) -> bool:
        """Open and not closing: a frame sent now is written."""
        sock = self.socket
        return sock is not None and sock.open and not self._protocol.closed

    async def write(self) -> None:
        """Write what the protocol queued. Raises :class:`TTSConnectionError` when the socket is closed or
        lost (the protocol was told first, so its frames count as never written)."""
        sock = self.socket
        if sock is None or not sock.open or self._protocol.closed:
            if sock is not None and not self._protocol.closed:  # closing; its close frame not handled yet
                self._lost()
            raise TTSConnectionError(f"{self.name}: the connection is closed")
        now = self.last_used = self._clock()
        self._keepalive.before_write(now)
        proto = self._protocol
        if not sock.paused and not self._lock.locked():
            sock.write(proto.data_to_send())  # the usual case: the transport takes the frames now
            return
        async with self._lock:  # the transport's buffer is full (or a write waits for it): drain first
            while proto.has_data_to_send():  # (frames queued while this one waited)
                for frame in proto.data_to_send():
                    await sock.drain()
                    if not sock.open:
                        self._lost()
                        raise TTSConnectionError(f"{self.name}: connection lost while sending")
                    sock.write((frame,))

    async def _write_quietly(self) -> None:
        while True:
            self._again = False
            with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
                await asyncio.wait_for(self.write(), self.timeout)
            if not self._again:  # (nothing was queued for it while this write was under way)
                return

    def write_soon(self) -> None:
        """Write what the protocol queued from a callback: one writer task. One already under way may have
        taken the queue before this frame was put in it: it writes once more."""
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._write_quietly(), name=f"{self.name}-writer"
            )
        else:
            self._again = True

    def cancel(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
