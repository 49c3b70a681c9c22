"""Usage through Pipecat: one ``TTSUsageMetricsData`` per turn carrying the characters billed, and the whole
``TurnUsage`` on the service's ``on_turn_usage`` event; checked against the emulator's billing counters."""

from __future__ import annotations

from pc_helpers import S1, S2, S3, Gate, InterruptWhen, Probe, errors_of, make_tts, pipeline, run
from pipecat.frames.frames import MetricsFrame
from pipecat.metrics.metrics import TTSUsageMetricsData
from test_pipecat_interrupt import PACING, llm_turn
from test_pipecat_kitta import make_kitta

from ttsbridge.emulator import Emulator
from ttsbridge.policy.usage import TurnEnd, TurnUsage
from ttsbridge.turns import Turn  # noqa: F401 - the ledger's home, for readers

SECOND_SLOW = "This part [[kitta:delay=60]] is slow to come."  # no audio of it before the barge-in


def collect(service: object) -> list[TurnUsage]:
    usages: list[TurnUsage] = []

    @service.event_handler("on_turn_usage")  # type: ignore[attr-defined]
    async def _on_usage(_service: object, usage: TurnUsage) -> None:
        usages.append(usage)

    return usages


def usage_metrics(frames: list) -> list[int]:
    return [
        d.value
        for f in frames
        if isinstance(f, MetricsFrame)
        for d in f.data
        if isinstance(d, TTSUsageMetricsData)
    ]


async def test_done_turn_reports_the_billed_characters(emu: Emulator) -> None:
    tts = make_tts(emu)
    usages = collect(tts)
    down, up = await run(pipeline(tts), llm_turn(S1, S2, S3), metrics=True)

    assert not errors_of(up)
    [usage] = usages
    billed = emu.stats.credits_charged - emu.stats.credits_refunded
    assert usage.ended is TurnEnd.DONE and usage.provider == "nineninesix"
    assert usage.characters_billed == billed == len(S1) + len(S2) + len(S3)
    # Pipecat's usage metric is the bill, once per turn (not len(text) per sentence)
    assert usage_metrics(down) == [billed]
    # heard to the end: every character sent was played out
    assert usage.characters_heard == usage.characters_sent
    assert usage.audio_seconds > 0


async def test_barge_in_bills_what_was_sent_and_hears_the_prefix(emu: Emulator) -> None:
    emu.config.realtime_factor = PACING
    tts = make_tts(emu)
    usages = collect(tts)
    gate, probe = Gate(), Probe(words=2)
    await run(pipeline(gate, tts, probe), [*llm_turn(S1, S2, S3), InterruptWhen(probe.words_seen)])

    await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, timeout=5.0)
    [usage] = usages
    assert usage.ended is TurnEnd.CANCELLED
    assert usage.characters_billed == emu.stats.credits_charged - emu.stats.credits_refunded > 0
    assert emu.stats.credits_refunded == 0  # Nineninesix: cancelled text stays billed
    assert 0 < usage.characters_heard < usage.characters_billed


async def test_kitta_barge_in_refunds_the_segment_without_audio(emu: Emulator) -> None:
    tts = make_kitta(emu)
    usages = collect(tts)
    gate, probe = Gate(), Probe()
    await run(pipeline(gate, tts, probe), [*llm_turn(S1, SECOND_SLOW), InterruptWhen(probe.first_audio)])

    await emu.wait_until(lambda: emu.stats.kitta_segments_refunded == 1, timeout=5.0)
    [usage] = usages
    assert usage.ended is TurnEnd.CANCELLED and usage.provider == "kitta"
    assert usage.characters_billed == len(S1) == emu.stats.kitta_units_committed
    assert emu.stats.kitta_units_refunded == len("This part  is slow to come.")  # the marker removed
    assert usage.characters_heard <= usage.characters_billed < usage.characters_sent
