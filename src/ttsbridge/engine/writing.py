"""The write path of a :class:`~ttsbridge.engine.connection.Connection`.

After a command, ``await connection.flush()`` writes what the protocol queued: straight into the transport
when it takes frames now (no await, no lock), else through websockets' ``send`` (which drains first) under one
lock. Frames queued from a callback (a frame received, the timer) are written by one writer task
(:meth:`WriterMixin._write_soon`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.errors import TTSBridgeError, TTSConnectionError


class WriterMixin:
    """The write path of :class:`~ttsbridge.engine.connection.Connection` (which sets these attributes and
    provides the methods declared below)."""

    protocol: TurnProtocol
    ws: ClientConnection | None
    name: str
    write_timeout: float
    ping_after_silence: float | None
    last_used: float
    last_read: float
    _loop: asyncio.AbstractEventLoop
    _ping_at: float | None
    _writer: asyncio.Task[None] | None
    _write_again: bool
    _send_lock: asyncio.Lock

    if TYPE_CHECKING:

        def writable(self) -> bool: ...
        def _after_input(self) -> None: ...
        def _lost(self, code: int | None, reason: str) -> None: ...
        def _ping(self, now: float) -> None: ...


    async def flush(self, timeout: float | None = None) -> None:
        """After a command: dispatch its events, follow its deadline, write its frames (bounded by ``timeout``
        when given). Raises :class:`TTSConnectionError` when the socket is closed or lost (the protocol was
        told first, so its frames count as never written)."""
        self._after_input()
        if not self.protocol.has_data_to_send():
            return
        if timeout is None:
            await self._write()
        else:
            await asyncio.wait_for(self._write(), timeout)

    async def _write(self) -> None:
        if not self.writable():
            if not self.protocol.closed and self.ws is not None:  # closing; its close frame not handled yet
                self._lost(*_close_info(None, self.ws))
            raise TTSConnectionError(f"{self.name}: the connection is closed")
        ws = self.ws
        assert ws is not None
        now = self.last_used = self._loop.time()
        after = self.ping_after_silence
        if after is not None and self._ping_at is None and now - self.last_read >= after:
            # A request to a connection that has been silent a while (an idle pooled one, a warm standby):
            # the liveness check goes out with it, so a dead path is found before the request's deadline.
            self._ping(now)
        if not ws.paused and not self._send_lock.locked():
            # The usual case: the transport takes the frames now (no await, no lock, no drain). The sans-I/O
            # protocol frames them and websockets' own send_data() writes them, as ws.send() would.
            sans_io = ws.protocol
            for frame in self.protocol.data_to_send():
                if type(frame) is str:
                    sans_io.send_text(frame.encode())
                else:
                    sans_io.send_binary(frame)
            ws.send_data()
            return
        try:  # the transport's buffer is full (or a write waits for it): websockets' send drains it first
            async with self._send_lock:
                while self.protocol.has_data_to_send():  # frames queued while this one waited
                    for frame in self.protocol.data_to_send():
                        await ws.send(frame)
        except ConnectionClosed as exc:
            code, reason = _close_info(exc)
            self._lost(code, reason)
            raise TTSConnectionError(f"{self.name}: connection lost while sending ({reason})") from None

    async def _write_quietly(self) -> None:
        while True:
            self._write_again = False
            with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
                await asyncio.wait_for(self._write(), self.write_timeout)
            if not self._write_again:  # (nothing was queued for it while this write was under way)
                return
    def _write_soon(self) -> None:
        """Write what the protocol queued from a callback (a frame received, the timer): one writer task. One
        already under way may have taken the queue before this frame was put in it: it writes once more."""
        if self._writer is None or self._writer.done():
            self._writer = self._loop.create_task(self._write_quietly(), name=f"{self.name}-writer")
        else:
            self._write_again = True


def _close_info(exc: ConnectionClosed | None, ws: ClientConnection | None = None) -> tuple[int | None, str]:
    """``(code, reason)`` of the server's close frame, or ``(None, description)`` when none was received."""
    rcvd = exc.rcvd if exc is not None else (ws.protocol.close_rcvd if ws is not None else None)
    if rcvd is None:
        sent = exc.sent if exc is not None else (ws.protocol.close_sent if ws is not None else None)
        if sent is not None and sent.code not in (1000, 1006):
            # websockets failed the connection on what the server sent (a message over max_size, a
            # protocol error): say what, with the close code it sent
            return None, f"closed by the client: {sent.reason or 'protocol error'} (code {sent.code})"
        return None, "connection dropped (no close frame)"
    return rcvd.code, rcvd.reason

__all__ = ["WriterMixin"]
