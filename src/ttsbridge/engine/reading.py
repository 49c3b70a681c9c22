"""The read path of a :class:`~ttsbridge.engine.connection.Connection`: the inbox its socket hands messages to.

What one read brings is handled in slices of :data:`SLICE` messages, one slice per loop iteration (the rest
waits :data:`HOLD` iterations once a turn's first audio was dispatched); the transport's reading pauses while
more than :data:`INBOX_HIGH` messages wait (the connection module's docstring says why).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from typing import TYPE_CHECKING

from websockets.asyncio.client import ClientConnection

from ttsbridge.engine.socket import Socket

#: Messages handled per loop iteration when a read brought more (see the module docstring).
SLICE = 8
#: Loop iterations the rest of a read waits after a turn's first audio was dispatched: what the framework
#: needs to hand that audio on (Pipecat: consumer, audio-context queue get, ``wait_for``, the push).
HOLD = 4
#: Messages waiting to be handled above which the transport stops reading (resumed once they are handled).
INBOX_HIGH = 512


class ReaderMixin:
    """The inbox of :class:`~ttsbridge.engine.connection.Connection` (which sets these attributes and provides
    the methods declared below)."""

    ws: ClientConnection | None
    last_read: float
    _loop: asyncio.AbstractEventLoop
    _sock: Socket | None
    _ping_at: float | None
    _condemned: bool
    _inbox: deque[tuple[bytes, bool]]
    _budget: int
    _hold: int
    _drainer: asyncio.Handle | None
    _paused: bool

    if TYPE_CHECKING:

        def _handle(self, data: bytes, text: bool) -> None: ...

    def new_read(self) -> None:
        """The socket got a new read: its first :data:`SLICE` messages may be handled at once. Anything read
        proves the connection alive (a liveness ping out is answered)."""
        self._budget = SLICE
        self.last_read = self._loop.time()
        self._ping_at = None
        self._condemned = False

    def incoming(self, data: bytes, text: bool) -> None:
        """One message, from the socket's ``data_received``: handled now while this read's slice lasts,
        else queued for the next slice (in order)."""
        inbox = self._inbox
        if inbox or self._budget <= 0 or self._hold or self.ws is None:
            inbox.append((data, text))
            if self.ws is None:
                return  # frames that came with the handshake's response: handled once connect() returns
            self._schedule_drain()
            if len(inbox) > INBOX_HIGH and not self._paused and self._sock is not None:
                self._paused = True
                with contextlib.suppress(Exception):
                    self._sock.transport.pause_reading()
            return
        self._budget -= 1
        self._handle(data, text)

    def _schedule_drain(self) -> None:
        """The next slice of the queued messages in the next loop iteration (one drain chain at a time)."""
        if self._drainer is None:
            self._drainer = self._loop.call_soon(self._drain)

    def _resume_reading(self) -> None:
        if self._paused and self._sock is not None:
            self._paused = False
            with contextlib.suppress(Exception):  # the transport may be gone already
                self._sock.transport.resume_reading()

    def _drain(self) -> None:
        """One slice of the queued messages; the next slice in the next loop iteration."""
        self._drainer = None
        if self._hold:
            self._hold -= 1
            self._schedule_drain()
            return
        inbox, handle = self._inbox, self._handle
        try:
            for _ in range(min(SLICE, len(inbox))):
                if self._hold:
                    break
                handle(*inbox.popleft())
        finally:  # (handle() catches what it can; a slice never ends the draining)
            if inbox:
                self._schedule_drain()  # (a first audio handled in this slice may have scheduled it)
            else:
                self._resume_reading()


__all__ = ["HOLD", "INBOX_HIGH", "SLICE", "ReaderMixin"]
