"""Edge cases of the Pipecat services found in review: barge-in at every point of a turn, odd LLM turns,
the word-timed transcript, metrics, settings and shutdown (all against the emulator, bounded waits)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pc_helpers import (
    S1,
    S2,
    S3,
    Gate,
    InterruptWhen,
    Probe,
    WaitFor,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    tone_len,
    words_of,
)
from pipecat.frames.frames import (
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    MetricsFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.metrics.metrics import TTFBMetricsData, TTSUsageMetricsData
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator

from ttsbridge.emulator import Emulator, Fault

AFTER = "Sure, go ahead."


def llm_turn(*sentences: str, size: int = 5) -> list:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + size]) for i in range(0, len(text), size)],
        LLMFullResponseEndFrame(),
    ]


def contexts(frames: list) -> list[str]:
    return list(dict.fromkeys(f.context_id for f in frames if isinstance(f, TTSAudioRawFrame)))


def when(emu: Emulator, predicate: Callable[[], bool]) -> tuple[asyncio.Event, asyncio.Task[None]]:
    """An event set once ``predicate`` holds on the emulator (bounded)."""
    event = asyncio.Event()

    async def watch() -> None:
        await emu.wait_until(predicate, timeout=10.0)
        event.set()

    return event, asyncio.ensure_future(watch())


def set_event() -> asyncio.Event:
    e = asyncio.Event()
    e.set()
    return e


def assert_clean_after(seen: list, cancelled: set[str]) -> None:
    """No audio, word or stop frame of a cancelled context after the (last) interruption."""
    cut = max(i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame))
    stale = [
        f
        for f in seen[cut + 1 :]
        if isinstance(f, (TTSAudioRawFrame, TTSTextFrame, TTSStoppedFrame)) and f.context_id in cancelled
    ]
    assert not stale


def assert_full_turn(seen: list, context_id: str, text: str, rate: int = 24000) -> None:
    assert len(audio_of(seen, context_id)) / 2 / rate == pytest.approx(tone_len(text), abs=0.03)
    assert [
        f.text for f in seen if isinstance(f, TTSTextFrame) and f.context_id == context_id
    ] == text.split()
    assert [f for f in seen if isinstance(f, TTSStoppedFrame) and f.context_id == context_id]


async def test_interruption_before_the_first_audio(emu: Emulator) -> None:
    emu.config.first_chunk_latency_s = 0.5
    started, watcher = when(emu, lambda: emu.stats.contexts_started >= 1)
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2), InterruptWhen(started), *llm_turn(AFTER)]
    try:
        _, up = await run(pipeline(gate, tts, probe), frames)
    finally:
        watcher.cancel()
    assert not errors_of(up)
    (only,) = contexts(probe.frames)
    assert_full_turn(probe.frames, only, AFTER)
    assert emu.stats.ws_connections == 1
    await emu.wait_until(lambda: emu.stats.contexts_cancelled >= 1, timeout=5.0)
    assert " ".join(words_of(probe.frames)) == AFTER


async def test_interruption_while_the_turn_is_opening(emu: Emulator) -> None:
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame(S1),
        LLMTextFrame(" Y"),
        InterruptWhen(set_event()),
        *llm_turn(AFTER),
    ]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    ctxs = contexts(probe.frames)
    assert_clean_after(probe.frames, set(ctxs[:-1]))
    assert_full_turn(probe.frames, ctxs[-1], AFTER)
    assert emu.stats.ws_connections == 1


async def test_interruption_between_two_llm_turns(emu: Emulator) -> None:
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1), WaitFor(probe.stopped), InterruptWhen(set_event()), *llm_turn(AFTER)]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    first, second = contexts(probe.frames)
    assert_full_turn(probe.frames, first, S1)
    assert_full_turn(probe.frames, second, AFTER)
    assert emu.stats.ws_connections == 1
    assert emu.stats.cancels == 0


async def test_two_interruptions_in_a_row(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [
        *llm_turn(S1, S2),
        InterruptWhen(probe.first_audio),
        InterruptWhen(set_event()),
        *llm_turn(AFTER),
    ]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    first, second = contexts(probe.frames)
    assert_clean_after(probe.frames, {first})
    assert_full_turn(probe.frames, second, AFTER)
    assert emu.stats.ws_connections == 1


async def test_interruption_during_a_concurrent_limit_retry(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1[:10], action="error", error_code="concurrent_limit", times=0))
    refused, watcher = when(emu, lambda: bool(emu.stats.errors_sent))
    tts = make_tts(emu, provider_options={"concurrent_limit_retries": 5, "retry_backoff": 0.3})
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2), InterruptWhen(refused), *llm_turn(AFTER)]
    try:
        _, up = await run(pipeline(gate, tts, probe), frames)
    finally:
        watcher.cancel()
    assert not errors_of(up)
    (only,) = contexts(probe.frames)
    assert_full_turn(probe.frames, only, AFTER)
    assert emu.stats.ws_connections == 1


async def test_speak_frame_inside_an_open_llm_turn(emu: Emulator) -> None:
    tts = make_tts(emu)
    context = LLMContext()
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame(S1),
        LLMTextFrame(" Y"),
        TTSSpeakFrame(AFTER),
        LLMTextFrame(S2[1:]),
        LLMFullResponseEndFrame(),
    ]
    _, up = await run(pipeline(tts, LLMAssistantAggregator(context)), frames)
    assert not errors_of(up)
    said = " ".join(str(m["content"]) for m in context.messages if m["role"] == "assistant")
    for text in (S1, S2, AFTER):
        assert said.count(text) == 1, said


async def test_whitespace_and_punctuation_only_turn(emu: Emulator) -> None:
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame("  "),
        LLMTextFrame("..."),
        LLMTextFrame(" "),
        LLMFullResponseEndFrame(),
        *llm_turn(AFTER),
    ]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    ctxs = contexts(probe.frames)
    assert_full_turn(probe.frames, ctxs[-1], AFTER)
    assert emu.stats.ws_connections == 1


LONG = [f"Sentence number {i} says, quite plainly, that item {i}'s price is ${i}.50!" for i in range(40)]


async def test_very_long_turn_puts_the_whole_text_in_the_context_once(emu: Emulator) -> None:
    tts = make_tts(emu)
    context = LLMContext()
    await run(pipeline(tts, LLMAssistantAggregator(context)), llm_turn(*LONG, size=7))
    said = [str(m["content"]) for m in context.messages if m["role"] == "assistant"]
    assert said == [" ".join(LONG)]


async def test_metrics_ttfb_once_per_turn_and_usage_equal_to_sent(emu: Emulator) -> None:
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2), WaitFor(probe.stopped), *llm_turn(S3)]
    _, _ = await run(pipeline(gate, tts, probe), frames, metrics=True)
    data = [d for f in probe.frames if isinstance(f, MetricsFrame) for d in f.data]
    ttfb = [d for d in data if isinstance(d, TTFBMetricsData) and d.value > 0]
    assert len(ttfb) == 2
    usage = sum(d.value for d in data if isinstance(d, TTSUsageMetricsData))
    sent = sum(len(m["transcript"].strip()) for _, m in emu.stats.messages if m.get("transcript"))
    assert usage == sent == len(S1) + len(S2) + len(S3)


async def test_shutdown_with_an_open_turn_cancel_frame(emu: Emulator) -> None:
    from pipecat.frames.frames import CancelFrame

    emu.config.realtime_factor = 1.0
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame(S1),
        LLMTextFrame(" Y"),
        WaitFor(probe.first_audio),
        CancelFrame(),
    ]
    await run(pipeline(gate, tts, probe), frames)
    await emu.wait_until(lambda: emu.stats.ws_open == 0, timeout=5.0)
    assert not tts._turns and not tts._background


async def test_voice_switch_mid_turn(emu: Emulator) -> None:
    from pipecat.frames.frames import TTSUpdateSettingsFrame

    from ttsbridge.emulator import TONE_VOICE_ID
    from ttsbridge.pipecat import NineninesixTTSService

    clone = emu.voices.clone(name="other", clip=b"not a wav")
    tts = make_tts(emu)
    context = LLMContext()
    gate, probe = Gate(), Probe()
    update = TTSUpdateSettingsFrame(delta=NineninesixTTSService.Settings(voice=clone.id))
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame(S1),
        LLMTextFrame(" Y"),
        update,
        LLMTextFrame(S2[1:]),
        LLMFullResponseEndFrame(),
        *llm_turn(S3),
    ]
    _, up = await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames)
    assert not errors_of(up)
    reqs = [m for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    assert [r["voice"]["id"] for r in reqs] == [TONE_VOICE_ID, clone.id, clone.id]
    said = [str(m["content"]) for m in context.messages if m["role"] == "assistant"]
    assert " ".join(said) == f"{S1} {S2} {S3}"


async def test_transform_keeps_original_text_in_context(emu: Emulator) -> None:
    async def at(text: str, _type: str) -> str:
        return text.replace("@", " at ")

    tts = make_tts(emu, text_transforms=[("*", at)])
    context = LLMContext()
    text = "Mail me@home, or call 555-0100 (ext. 7)? Yes: do it."
    await run(pipeline(tts, LLMAssistantAggregator(context)), llm_turn(text))
    said = [str(m["content"]) for m in context.messages if m["role"] == "assistant"]
    assert said == [text]


async def test_connect_failure_never_logs_the_key() -> None:
    from loguru import logger

    from ttsbridge.pipecat import NineninesixTTSService

    lines: list[str] = []
    handler = logger.add(lambda m: lines.append(str(m)), level="TRACE")
    key = "sk_996_secret_connect_key_9999"
    try:
        tts = NineninesixTTSService(
            key, base_url="http://127.0.0.1:9", settings=NineninesixTTSService.Settings(voice="v")
        )
        _, up = await run(tts, llm_turn(S1))
    finally:
        logger.remove(handler)
    errs = errors_of(up)
    texts = [
        *lines,
        *(e.error for e in errs),
        *(repr(e.exception) for e in errs),
        *(str(e.exception) for e in errs),
    ]
    assert errs
    assert not [t for t in texts if "secret_connect" in t]


async def test_uninterruptible_speak_survives_interruption(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    speak = TTSSpeakFrame(S1)
    speak.interruptible = False
    frames = [speak, InterruptWhen(probe.first_audio), *llm_turn(AFTER)]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    first, second = contexts(probe.frames)
    assert_full_turn(probe.frames, first, S1)
    assert_full_turn(probe.frames, second, AFTER)
    assert emu.stats.cancels == 0


async def test_kitta_edges(emu: Emulator) -> None:
    from ttsbridge.emulator import TONE_VOICE_ID
    from ttsbridge.pipecat import KittaTTSService

    emu.config.kitta.realtime_factor = 2.0
    tts = KittaTTSService(
        emu.config.kitta.a_valid_key(),
        base_url=emu.base_url,
        settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
        provider_options={"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0},
    )
    context = LLMContext()
    gate, probe = Gate(), Probe()
    text = "Mail me@home, or call 555-0100 (ext. 7)? Yes: do it."
    frames = [
        *llm_turn(S1, S2),
        InterruptWhen(probe.first_audio),
        InterruptWhen(set_event()),
        *llm_turn(text),
    ]
    _, up = await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames)
    assert not errors_of(up)
    first, second = contexts(probe.frames)
    assert_clean_after(probe.frames, {first})
    assert [
        f.text for f in probe.frames if isinstance(f, TTSTextFrame) and f.context_id == second
    ] == text.split()
    said = [str(m["content"]) for m in context.messages if m["role"] == "assistant"]
    assert said[-1] == text


@pytest.mark.parametrize("mode", ["sentence", "token"])
async def test_end_frame_mid_turn_paced(emu: Emulator, mode: str) -> None:
    from pipecat.services.tts_service import TextAggregationMode

    emu.config.realtime_factor = 4.0
    kw = {"text_aggregation_mode": TextAggregationMode.TOKEN} if mode == "token" else {}
    tts = make_tts(emu, stop_frame_timeout_s=60.0, **kw)
    gate, probe = Gate(), Probe()
    frames = [LLMFullResponseStartFrame(), LLMTextFrame(S1), LLMTextFrame(" " + S2), LLMTextFrame(" It")]
    _, up = await run(pipeline(gate, tts, probe), frames)
    assert not errors_of(up)
    sent = [m["transcript"] for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    total = sum(tone_len(t) for t in sent)
    assert len(audio_of(probe.frames)) / 2 / 24000 == pytest.approx(total, abs=0.05)
    await emu.wait_until(lambda: emu.stats.ws_open == 0, timeout=5.0)


async def test_http_token_mode_sends_clauses_not_tokens(emu: Emulator) -> None:
    """TOKEN mode over HTTP: one request per clause (not per token, which would speak word fragments), the
    rest at the end of the response; every word in the context once."""
    from pipecat.services.tts_service import TextAggregationMode

    from ttsbridge.emulator import TONE_VOICE_ID
    from ttsbridge.pipecat import NineninesixHttpTTSService

    tts = NineninesixHttpTTSService(
        emu.api_key,
        base_url=emu.base_url,
        settings=NineninesixHttpTTSService.Settings(voice=TONE_VOICE_ID),
        text_aggregation_mode=TextAggregationMode.TOKEN,
        stop_frame_timeout_s=60.0,
    )
    context = LLMContext()
    probe = Probe()
    frames = [*llm_turn(S1, S2, size=4), *llm_turn(AFTER, size=3)]
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), frames)

    assert not errors_of(up)
    clauses = ["Hello there, ", "it is good to hear from you. ", S2, "Sure, ", "go ahead."]
    assert emu.stats.http_requests == len(clauses)
    assert emu.stats.credits_charged == sum(len(c.strip()) for c in clauses)
    first, second = contexts(probe.frames)
    assert len(audio_of(probe.frames, second)) / 2 / 24000 == pytest.approx(
        sum(tone_len(c) for c in clauses[3:]), abs=0.05
    )
    assert len(audio_of(probe.frames, first)) / 2 / 24000 == pytest.approx(
        sum(tone_len(c) for c in clauses[:3]), abs=0.05
    )
    assert words_of(probe.frames) == f"{S1} {S2} {AFTER}".split()
    said = [str(m["content"]) for m in context.messages if m["role"] == "assistant"]
    assert said == [f"{S1} {S2}", AFTER]
