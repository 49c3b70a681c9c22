"""EngineTurn.take_ready against the emulator over loopback: the chunks already received, resampled
like the iterator's, bounded, in order; never the end; nothing once cancelled."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from support import wait_until
from take_ready_checks import check_nothing_once_cancelled, drain, finish_and_compare, read_through_take_ready
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

S2 = "How can I help you today? Let me check that for you."


@pytest.fixture
async def provider() -> AsyncIterator[NineninesixTurnProvider]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
        p = NineninesixTurnProvider(
            emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID)
        )
        try:
            yield p
        finally:
            await p.aclose()


async def received_whole_turn(provider: NineninesixTurnProvider, rate: int) -> EngineTurn:
    """A turn whose audio and end have all been received (queued, nothing read yet)."""
    turn = await provider.open_turn(sample_rate=rate)
    await turn.send(S2)
    await turn.end()
    ctx = turn
    assert ctx is not None
    await wait_until(lambda: ctx.facts.state.terminal, timeout=10.0)
    return turn


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
async def test_take_ready_gives_the_queued_audio_resampled_bounded_and_in_order(
    provider: NineninesixTurnProvider, rate: int
) -> None:
    reference = b"".join(await drain((await received_whole_turn(provider, rate)).__aiter__()))
    turn = await received_whole_turn(provider, rate)
    pieces, taken, it = await read_through_take_ready(turn, int(0.1 * rate) * 2)
    assert taken >= 2  # the queued chunks came out through take_ready
    assert turn.audio_started and not turn.done
    await finish_and_compare(turn, pieces, it, reference)


async def test_take_ready_gives_nothing_once_cancelled(provider: NineninesixTurnProvider) -> None:
    turn = await received_whole_turn(provider, 24000)
    await check_nothing_once_cancelled(turn)
    assert turn.outcome in ("cancelled", "done")
