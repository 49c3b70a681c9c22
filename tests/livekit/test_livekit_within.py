"""``livekit._waits.within``: a bounded await in the caller's task whose cancellation is never lost.

Pure asyncio (no sockets): what the stream's opening relies on when ``aclose()`` races the turn's opening.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from ttsbridge.livekit._waits import within


async def test_the_result_comes_back_in_the_callers_task() -> None:
    seen: list[asyncio.Task[object] | None] = []

    async def opening() -> str:
        seen.append(asyncio.current_task())
        return "turn"

    async def caller() -> str:
        return await within(opening(), 1.0)

    task = asyncio.create_task(caller())
    assert await asyncio.wait_for(task, 5.0) == "turn"
    if sys.version_info >= (3, 11):
        assert seen == [task]  # no task of its own (3.10: a task of its own, then the result)


async def test_a_late_result_is_a_timeout_and_the_opening_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(within(slow(), 0.01), 5.0)
    assert cancelled.is_set()


async def test_a_cancellation_swallowed_by_the_opening_is_honoured_and_its_result_discarded() -> None:
    """The caller is cancelled while the opening finishes and swallows the cancellation (returns anyway):
    the caller still ends cancelled, and the turn it would have got is handed to ``discard``."""
    started = asyncio.Event()
    discarded: list[str] = []

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # finishes its work regardless
        return "turn"

    async def discard(turn: str) -> None:
        discarded.append(turn)

    task = asyncio.create_task(within(stubborn(), 5.0, discard=discard))
    await asyncio.wait_for(started.wait(), 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)
    assert discarded == ["turn"]
