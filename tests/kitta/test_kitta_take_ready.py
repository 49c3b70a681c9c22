"""KittaTurn.take_ready against the emulator over loopback (as NineninesixTurn's): the chunks already received
behind the one just read, resampled like the iterator's, bounded, in order; never the end; nothing once
cancelled. The adapters coalesce with it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from support import wait_until
from ttsbridge.kitta import KittaTurnProvider
from ttsbridge.kitta.provider import KittaTurn

MakeProvider = Callable[..., KittaTurnProvider]

TEXT = "How can I help you today? Let me check that for you."


async def received_whole_turn(make_provider: MakeProvider, rate: int) -> KittaTurn:
    """A turn whose audio and finish have all been received (queued, nothing read yet)."""
    turn = await make_provider(standby=False).open_turn(sample_rate=rate)
    await turn.send(TEXT)
    await turn.end()
    await wait_until(lambda: turn.generation.done, timeout=10.0)
    return turn


async def drain(it: AsyncIterator[bytes]) -> list[bytes]:
    async def run() -> list[bytes]:
        return [pcm async for pcm in it]

    return await asyncio.wait_for(run(), 10.0)


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
async def test_take_ready_gives_the_queued_audio_resampled_bounded_and_in_order(
    make_provider: MakeProvider, rate: int
) -> None:
    reference = b"".join(await drain((await received_whole_turn(make_provider, rate)).__aiter__()))
    turn = await received_whole_turn(make_provider, rate)
    assert turn.take_ready(1 << 20) == b""  # nothing before the first chunk was read
    limit = int(0.1 * rate) * 2
    it = turn.__aiter__()
    pieces = [await asyncio.wait_for(it.__anext__(), 10.0)]
    taken = 0
    while part := turn.take_ready(limit):
        assert len(part) <= limit and len(part) % 2 == 0
        pieces.append(part)
        taken += 1
    assert taken >= 2  # the queued chunks came out through take_ready
    pieces += await drain(it)  # the end was not consumed: the iterator finishes the turn (resampler tail)
    assert turn.outcome == "done"
    assert b"".join(pieces) == reference  # nothing lost, nothing reordered, resampled exactly the same
    assert turn.take_ready(limit) == b""  # after the end


async def test_take_ready_gives_nothing_once_cancelled(make_provider: MakeProvider) -> None:
    turn = await received_whole_turn(make_provider, 24000)
    it = turn.__aiter__()
    assert await asyncio.wait_for(it.__anext__(), 10.0)
    assert turn.take_ready(4800)  # chunks are queued (100 ms)
    await turn.cancel()
    assert turn.take_ready(1 << 20) == b""
    assert await drain(it) == []  # and the iterator yields nothing more
