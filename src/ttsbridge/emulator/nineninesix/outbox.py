"""Per-connection state of the Nineninesix WebSocket: contexts, their items, and the writer's outbox."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from ttsbridge.emulator.nineninesix.faults import Fault
from ttsbridge.emulator.pacing import Pacer


@dataclass
class Item:
    """One transcript queued in a context."""

    text: str
    chars: int
    voice_id: str
    fault: Fault | None
    settled: bool = False  # confirmed (rendered), billed (cancel) or refunded


@dataclass
class Context:
    id: str
    pending: deque[Item] = field(default_factory=deque)
    items: list[Item] = field(default_factory=list)
    ended: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    generating: bool = False
    first_chunk: bool = True
    pacer: Pacer = field(default_factory=Pacer)


@dataclass
class Out:
    kind: Literal["frame", "close", "drop", "stop"]
    frame: dict[str, Any] | None = None
    context_id: str | None = None
    code: int = 1000
    reason: str = ""


class Outbox:
    """Frames waiting for the connection's writer, FIFO, bounded for chunks (back-pressure)."""

    def __init__(self, limit: int = 32) -> None:
        self._items: deque[Out] = deque()
        self._limit = limit
        self._cond = asyncio.Condition()
        self.closed = False

    async def put(self, out: Out, *, wait: bool = True) -> None:
        async with self._cond:
            if wait:
                await self._cond.wait_for(lambda: self.closed or len(self._items) < self._limit)
            if self.closed:
                return
            self._items.append(out)
            if out.kind != "frame":
                self.closed = True
            self._cond.notify_all()

    async def get(self) -> Out:
        async with self._cond:
            await self._cond.wait_for(lambda: bool(self._items))
            out = self._items.popleft()
            self._cond.notify_all()
            return out

    async def finish(self) -> None:
        """Let the writer end after what is queued (even when closed to new frames)."""
        async with self._cond:
            self.closed = True
            self._items.append(Out("stop"))
            self._cond.notify_all()

    def purge(self, context_id: str) -> int:
        """Drop the queued chunk frames of ``context_id``; return how many."""
        keep = deque(o for o in self._items if o.context_id != context_id)
        n = len(self._items) - len(keep)
        self._items = keep
        return n
