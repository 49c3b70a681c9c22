"""Usage through LiveKit: ``TTSMetrics`` carries the characters billed and the audio delivered, and
``tts.on("turn_usage", ...)`` the whole ``TurnUsage``; checked against the emulator's billing counters."""

from __future__ import annotations

import asyncio

import pytest
from lk_helpers import BOUND, FAST, S1, S2, Events, make_tts, run_stream
from test_livekit_kitta import make_kitta

from ttsbridge.emulator import Emulator
from ttsbridge.livekit import TURN_USAGE_EVENT
from ttsbridge.policy.usage import TurnEnd, TurnUsage


def collect(t: object) -> list[TurnUsage]:
    usages: list[TurnUsage] = []
    t.on(TURN_USAGE_EVENT, usages.append)  # type: ignore[attr-defined]
    return usages


async def test_stream_metrics_carry_the_bill(emu: Emulator) -> None:
    t = make_tts(emu)
    ev, usages = Events(t), collect(t)
    try:
        await run_stream(t, [S1, S2])
    finally:
        await t.aclose()
    [usage] = usages
    billed = emu.stats.credits_charged - emu.stats.credits_refunded
    assert usage.ended is TurnEnd.DONE and usage.characters_billed == billed == len(S1) + len(S2)
    [metrics] = ev.metrics
    # LiveKit would count len(text) of what was pushed (with the spaces between tokens); this is the bill
    assert metrics.characters_count == billed
    assert metrics.audio_duration == usage.audio_seconds > 0
    assert usage.characters_heard == usage.characters_sent  # every aligned word was emitted


async def test_kitta_barge_in_refunds_the_segment_without_audio(emu: Emulator) -> None:
    t = make_kitta(emu)
    usages = collect(t)
    try:
        stream = t.stream(conn_options=FAST)
        stream.push_text(f"{S1} This part [[kitta:delay=60]] is slow to come.")
        stream.end_input()
        await asyncio.wait_for(stream.__anext__(), BOUND)
        await asyncio.wait_for(stream.aclose(), BOUND)  # what LiveKit does on interruption
        await emu.wait_until(lambda: emu.stats.kitta_segments_refunded == 1, timeout=BOUND)
    finally:
        await t.aclose()
    [usage] = usages
    assert usage.ended is TurnEnd.CANCELLED and usage.provider == "kitta"
    assert usage.characters_billed == len(S1) == emu.stats.kitta_units_committed
    assert emu.stats.kitta_units_refunded == len("This part  is slow to come.")
    assert usage.characters_heard <= usage.characters_billed < usage.characters_sent


@pytest.mark.parametrize("provider", ["nineninesix", "kitta"])
async def test_a_barged_in_stream_emits_one_cancelled_metrics_with_the_bill(
    emu: Emulator, provider: str
) -> None:
    # LiveKit emits TTSMetrics at a segment's final frame, which an interrupted stream never reaches: the
    # characters the provider billed for the cut turn would reach no metrics listener (nor LiveKit's usage
    # collector). The plugin emits one, cancelled=True, with the bill and the audio delivered.
    emu.config.realtime_factor = emu.config.kitta.realtime_factor = 2.0  # still generating at the cut
    t = make_kitta(emu) if provider == "kitta" else make_tts(emu)
    ev, usages = Events(t), collect(t)
    try:
        stream = t.stream(conn_options=FAST)
        stream.push_text(f"{S1} {S2}")
        stream.end_input()
        first = await asyncio.wait_for(stream.__anext__(), BOUND)
        await asyncio.wait_for(stream.aclose(), BOUND)  # what LiveKit does on interruption
        if provider == "kitta":
            await emu.wait_until(lambda: emu.stats.kitta_client_closes >= 1, timeout=BOUND)
    finally:
        await t.aclose()
    [usage] = usages
    assert usage.ended is TurnEnd.CANCELLED
    [metrics] = ev.metrics
    assert metrics.cancelled is True and metrics.streamed is True
    assert metrics.request_id == first.request_id
    assert metrics.metadata is not None and metrics.metadata.model_provider == t.provider
    if provider == "kitta":  # the segments with audio: S1 only (S2's was refunded or never generated)
        assert (
            metrics.characters_count == usage.characters_billed == emu.stats.kitta_units_committed == len(S1)
        )
    else:  # "all text sent for the context is billed"
        billed = emu.stats.credits_charged - emu.stats.credits_refunded
        assert metrics.characters_count == usage.characters_billed == billed > 0
    assert metrics.audio_duration == usage.audio_seconds > 0
    assert metrics.ttfb > 0 and metrics.duration >= metrics.ttfb


async def test_a_stream_that_completes_emits_no_extra_metrics_on_close(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        await run_stream(t, [S1])
    finally:
        await t.aclose()
    [metrics] = ev.metrics
    assert metrics.cancelled is False
