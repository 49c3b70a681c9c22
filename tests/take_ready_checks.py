"""The take_ready checks both providers' turns share (tests/nineninesix/test_nns_take_ready.py,
tests/kitta/test_kitta_take_ready.py): a turn whose whole audio is already received is read once through
take_ready and once plainly, and the two must give the same bytes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

WAIT = 10.0


async def drain(it: AsyncIterator[bytes]) -> list[bytes]:
    async def run() -> list[bytes]:
        return [pcm async for pcm in it]

    return await asyncio.wait_for(run(), WAIT)


async def read_through_take_ready(turn: Any, limit: int) -> tuple[list[bytes], int, AsyncIterator[bytes]]:
    """The first chunk by iteration, then every queued chunk by ``take_ready(limit)`` (each checked against
    the bound); returns the pieces, how many take_ready calls gave audio, and the iterator (not finished)."""
    it = turn.__aiter__()
    pieces = [await asyncio.wait_for(it.__anext__(), WAIT)]
    taken = 0
    while part := turn.take_ready(limit):
        assert len(part) <= limit and len(part) % 2 == 0
        pieces.append(part)
        taken += 1
    return pieces, taken, it


async def finish_and_compare(
    turn: Any, pieces: list[bytes], it: AsyncIterator[bytes], reference: bytes
) -> None:
    pieces += await drain(it)  # the end was not consumed: the iterator finishes the turn (resampler tail)
    assert turn.outcome == "done"
    assert b"".join(pieces) == reference  # nothing lost, nothing reordered, resampled exactly the same
    assert turn.take_ready(1 << 20) == b""  # after the end


async def check_nothing_once_cancelled(turn: Any) -> None:
    it = turn.__aiter__()
    assert await asyncio.wait_for(it.__anext__(), WAIT)
    assert turn.take_ready(4800)  # chunks are queued (100 ms)
    await turn.cancel()
    assert turn.take_ready(1 << 20) == b""
    assert await drain(it) == []  # and the iterator yields nothing more
