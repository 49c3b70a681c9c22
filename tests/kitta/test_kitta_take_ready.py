"""EngineTurn.take_ready against the emulator over loopback (as EngineTurn's): the chunks already received
behind the one just read, resampled like the iterator's, bounded, in order; never the end; nothing once
cancelled. The adapters coalesce with it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from support import wait_until
from take_ready_checks import check_nothing_once_cancelled, drain, finish_and_compare, read_through_take_ready
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.kitta import KittaTurnProvider

MakeProvider = Callable[..., KittaTurnProvider]

TEXT = "How can I help you today? Let me check that for you."


async def received_whole_turn(make_provider: MakeProvider, rate: int) -> EngineTurn:
    """A turn whose audio and finish have all been received (queued, nothing read yet)."""
    turn = await make_provider(standby=False).open_turn(sample_rate=rate)
    await turn.send(TEXT)
    await turn.end()
    await wait_until(lambda: turn.settled, timeout=10.0)
    return turn


@pytest.mark.parametrize("rate", [16000, 24000, 48000])
async def test_take_ready_gives_the_queued_audio_resampled_bounded_and_in_order(
    make_provider: MakeProvider, rate: int
) -> None:
    reference = b"".join(await drain((await received_whole_turn(make_provider, rate)).__aiter__()))
    turn = await received_whole_turn(make_provider, rate)
    assert turn.take_ready(1 << 20) == b""  # nothing before the first chunk was read
    pieces, taken, it = await read_through_take_ready(turn, int(0.1 * rate) * 2)
    assert taken >= 2  # the queued chunks came out through take_ready
    await finish_and_compare(turn, pieces, it, reference)


async def test_take_ready_gives_nothing_once_cancelled(make_provider: MakeProvider) -> None:
    await check_nothing_once_cancelled(await received_whole_turn(make_provider, 24000))
