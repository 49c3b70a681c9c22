"""Usage through LiveKit: ``TTSMetrics`` carries the characters billed and the audio delivered, and
``tts.on("turn_usage", ...)`` the whole ``TurnUsage``; checked against the emulator's billing counters."""

from __future__ import annotations

import asyncio

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
