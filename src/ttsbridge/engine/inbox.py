"""The inbox of a :class:`~ttsbridge.engine.connection.Connection`: the messages its socket hands over, handled
in slices (modelled on websockets' ``asyncio/messages.py`` ``Assembler``: high/low water, pause/resume).

What one read brings is handled :data:`SLICE` messages at a time, one slice per loop iteration, so a turn's
first chunk reaches its consumer (and the framework) before the rest of a burst is parsed, and other streams'
work runs between slices. After a turn's first audio was dispatched the rest waits :data:`HOLD` loop
iterations (what Pipecat needs to hand that audio on). Above :data:`INBOX_HIGH` waiting messages the
transport stops reading; it reads again once no more than :data:`INBOX_LOW` wait. Messages that come before
the connection is open (with the handshake's response) wait until :meth:`Inbox.release`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

__all__ = ["HOLD", "INBOX_HIGH", "INBOX_LOW", "SLICE", "Inbox"]

#: Messages handled per loop iteration when a read brought more.
SLICE = 8
#: Loop iterations the rest of a read waits after a turn's first audio was dispatched: what the framework
#: needs to hand that audio on (Pipecat: consumer, audio-context queue get, ``wait_for``, the push).
HOLD = 4
#: Messages waiting to be handled above which the transport stops reading ...
INBOX_HIGH = 512
#: ... and at or below which it reads again.
INBOX_LOW = INBOX_HIGH // 4


class Inbox:
    """Messages on their way to ``handle(data, text)``; ``pause``/``resume`` the transport's reading."""

    def __init__(
        self,
        handle: Callable[[bytes, bool], None],
        pause: Callable[[], None],
        resume: Callable[[], None],
    ) -> None:
        self._handle = handle
        self._pause = pause
        self._resume = resume
        self._queue: deque[tuple[bytes, bool]] = deque()
        self._loop = asyncio.get_running_loop()
        self._budget = SLICE
        self._hold = 0  # loop iterations the queued messages still wait (see HOLD)
        self._drainer: asyncio.Handle | None = None
        self._open = False  # released: messages may be handled
        #: The transport's reading is paused (above :data:`INBOX_HIGH`).
        self.paused = False

    def __len__(self) -> int:
        return len(self._queue)

    def new_read(self) -> None:
        """The socket got a new read: its first :data:`SLICE` messages may be handled at once."""
        self._budget = SLICE

    def put(self, data: bytes, text: bool) -> None:
        """One message: handled now while this read's slice lasts, else queued for the next slice (in order)."""
        queue = self._queue
        if queue or self._budget <= 0 or self._hold or not self._open:
            queue.append((data, text))
            if not self._open:
                return  # the handshake's response brought it: handled once released
            self._schedule()
            if len(queue) > INBOX_HIGH and not self.paused:
                self.paused = True
                self._pause()
            return
        self._budget -= 1
        self._handle(data, text)

    def release(self) -> None:
        """The connection is open: what came with the handshake's response is handled (from the next slice)."""
        self._open = True
        if self._queue:
            self._schedule()

    def hold(self) -> None:
        """A turn's first audio was just dispatched: the rest of this read waits :data:`HOLD` iterations."""
        self._hold = HOLD
        self._schedule()

    def flush(self) -> None:
        """Handle everything queued now (the transport ended: its close comes after what it brought)."""
        if self._drainer is not None:
            self._drainer.cancel()
            self._drainer = None
        queue, handle = self._queue, self._handle
        while queue:
            handle(*queue.popleft())
        self._resume_reading()

    def _schedule(self) -> None:
        """The next slice in the next loop iteration (one drain chain at a time)."""
        if self._drainer is None:
            self._drainer = self._loop.call_soon(self._drain)

    def _resume_reading(self) -> None:
        if self.paused:
            self.paused = False
            self._resume()

    def _drain(self) -> None:
        """One slice of the queued messages; the next slice in the next loop iteration."""
        self._drainer = None
        if self._hold:
            self._hold -= 1
            self._schedule()
            return
        queue, handle = self._queue, self._handle
        try:
            for _ in range(min(SLICE, len(queue))):
                if self._hold:
                    break
                handle(*queue.popleft())
        finally:  # (handle() catches what it can; a slice never ends the draining)
            if queue:
                self._schedule()  # (a first audio handled in this slice may have scheduled it)
            if len(queue) <= INBOX_LOW:
                self._resume_reading()
