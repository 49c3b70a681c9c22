"""The consumer side of one turn: a delivery queue the connection's dispatch feeds.

:class:`TurnStream` holds no turn state: only the events not yet consumed. Waiting is bounded without a task
per chunk: a single future, woken by :meth:`feed`, and one ``loop.call_at`` handle when a deadline is given
(``asyncio.wait_for`` would create a task per wait on Python 3.11). A chunk already queued is returned without
awaiting at all.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from ttsbridge.engine.events import AudioReceived, TurnDone, TurnEvent, TurnFailed

_STOP = TurnDone("", cancelled=True)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _settle(fut: asyncio.Future[bool], value: bool) -> None:
    if not fut.done():
        fut.set_result(value)


class TurnStream:
    """Events of one turn, in order. ``feed`` is called by the connection's dispatch (a plain callable sink)."""

    __slots__ = ("_end", "_items", "_stopped", "_waiter")

    def __init__(self) -> None:
        self._items: deque[TurnEvent] = deque()
        self._stopped = False
        self._waiter: asyncio.Future[None] | None = None
        self._end: asyncio.Future[bool] | None = None  # only while someone awaits the turn's end

    def __call__(self, event: TurnEvent) -> None:
        self.feed(event)

    def feed(self, event: TurnEvent) -> None:
        if self._stopped:  # nothing more is delivered once stopped; a wait for the end still ends
            if self._end is not None and type(event) is not AudioReceived:
                _settle(self._end, True)
            return
        self._items.append(event)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        end = self._end
        if end is not None and type(event) is not AudioReceived and event is not _STOP:
            _settle(end, True)

    async def wait_end(self, timeout: float) -> bool:
        """Wait (bounded by ``timeout``) until the turn's end event is fed, whoever consumes it; False on
        timeout. For a caller that must know the turn is over (a cancel waiting for its acknowledgement)."""
        loop = asyncio.get_running_loop()
        end: asyncio.Future[bool] = loop.create_future()
        self._end = end
        timer = loop.call_later(timeout, _settle, end, False)
        try:
            return await end
        finally:
            timer.cancel()
            self._end = None

    def stop(self) -> None:
        """Drop what is queued and end the iteration (barge-in: nothing more is yielded)."""
        self._items.clear()
        self._stopped = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pending(self) -> int:
        return len(self._items)

    def take_ready(self, max_bytes: int) -> bytes:
        """The PCM of the audio chunks already queued at the front, joined, in order, stopping before the
        chunk that would make it longer than ``max_bytes``; ``b""`` when there is none. Synchronous: never
        waits, never raises. The turn's end or error is never consumed (the iterator reports it), and once
        :meth:`stop` ran nothing is left to take. What it returns is consumed: the iterator yields the rest.
        """
        items = self._items
        taken: list[bytes] = []
        size = 0
        while items:
            ev = items[0]
            if type(ev) is not AudioReceived:
                break
            size += len(ev.pcm)
            if size > max_bytes:
                break
            taken.append(items.popleft().pcm)  # type: ignore[union-attr]
        if not taken:
            return b""
        return taken[0] if len(taken) == 1 else b"".join(taken)

    async def get(self, deadline: float | None = None) -> TurnEvent | None:
        """The next event, or None when the loop clock reaches ``deadline`` first."""
        items = self._items
        if items:
            return items.popleft()
        loop = asyncio.get_running_loop()
        while not items:
            if self._stopped:
                return _STOP
            if deadline is not None and loop.time() >= deadline:
                return None
            waiter = self._waiter = loop.create_future()
            timer = loop.call_at(deadline, _wake, waiter) if deadline is not None else None
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        return items.popleft()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._pcm()

    async def _pcm(self) -> AsyncIterator[bytes]:
        """PCM until the turn is done; raises the error of a failed turn."""
        while True:
            ev = await self.get()
            if isinstance(ev, AudioReceived):
                yield ev.pcm
            elif isinstance(ev, TurnFailed):
                raise ev.error
            else:
                return


__all__ = ["TurnStream"]
