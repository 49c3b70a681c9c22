"""The phrase cache behind the Pipecat services: a ``TTSSpeakFrame`` of a cached phrase sends nothing, bills
nothing and pushes the very samples (and words) of the live render through the service's own path (one audio
context per turn, word frames, usage metrics, tracing); barge-in leaves no stale frame; LLM turns stay live."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pc_helpers import (
    S1,
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
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStartedFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from test_pipecat_tracing import run_traced
from test_pipecat_usage import usage_metrics

from otel_support import attrs, named
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.cache import PhraseCache
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_frequency
from ttsbridge.pipecat import KittaTTSService, NineninesixHttpTTSService
from ttsbridge.policy.usage import TurnUsage

GREETING = "Hello! Thanks for calling Acme, how can I help?"
BYE = "Thank you for calling. Goodbye!"
RATE = 24000
PROVIDERS = ["nineninesix", "kitta"]
#: a long fixed prompt (an IVR menu), so a barge-in lands while it is still being pushed
MENU = " ".join(f"For option {n}, please say the word number {n} now." for n in range(1, 25))


def service(emu: Emulator, provider: str, cache: PhraseCache | None = None, **kw: Any) -> Any:
    if provider == "kitta":
        return KittaTTSService(
            emu.config.kitta.a_valid_key(),
            base_url=emu.base_url,
            settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
            phrase_cache=cache,
            **kw,
        )
    return make_tts(emu, phrase_cache=cache, **kw)


def http_service(emu: Emulator, cache: PhraseCache | None) -> NineninesixHttpTTSService:
    return NineninesixHttpTTSService(
        emu.api_key,
        base_url=emu.base_url,
        settings=NineninesixHttpTTSService.Settings(voice=TONE_VOICE_ID),
        phrase_cache=cache,
    )


def requests(emu: Emulator, provider: str) -> int:
    if provider == "kitta":
        return emu.stats.kitta_sessions
    return len(emu.stats.messages) + emu.stats.http_requests


def llm_turn(text: str) -> list:
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 5]) for i in range(0, len(text), 5)],
        LLMFullResponseEndFrame(),
    ]


def contexts_of(frames: list) -> list[str]:
    return list(dict.fromkeys(f.context_id for f in frames if isinstance(f, TTSAudioRawFrame)))


def collect_usage(svc: Any) -> list[TurnUsage]:
    usages: list[TurnUsage] = []

    @svc.event_handler("on_turn_usage")
    async def _on_usage(_service: object, usage: TurnUsage) -> None:
        usages.append(usage)

    return usages


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_cached_speak_frame_sends_nothing_and_pushes_the_live_samples_and_words(
    emu: Emulator, provider: str
) -> None:
    live_tts = service(emu, provider)
    live_down, _ = await run(pipeline(live_tts), [TTSSpeakFrame(GREETING)], rate=RATE, metrics=True)

    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = service(emu, provider, cache)
    usages = collect_usage(tts)
    assert (await asyncio.wait_for(cache.warm(tts, [GREETING], sample_rate=RATE), 10.0)).stored == 1
    before = requests(emu, provider)
    down, up = await run(pipeline(tts), [TTSSpeakFrame(GREETING)], rate=RATE, metrics=True)

    assert not errors_of(up)
    assert requests(emu, provider) == before, "a hit sends nothing to the server"
    assert audio_of(down) == audio_of(live_down) != b""  # the very samples of the live render
    assert words_of(down) == words_of(live_down) == GREETING.split()
    assert len(contexts_of(down)) == 1
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 1
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    # billed nothing: Pipecat's usage metric is 0, the ledger reports the cached characters
    assert usage_metrics(live_down) == [len(GREETING)] and usage_metrics(down) == [0]
    [usage] = usages
    assert usage.characters_billed == usage.characters_sent == 0
    assert usage.characters_cached == len(GREETING)
    assert usage.characters_heard == len(GREETING)
    assert cache.stats().hits == 1


async def test_the_first_speak_frame_is_stored_and_the_second_one_hits(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = make_tts(emu, phrase_cache=cache)
    probe = Probe()
    frames = [TTSSpeakFrame(GREETING), WaitFor(probe.stopped), TTSSpeakFrame(GREETING)]
    _, up = await run(pipeline(Gate(), tts, probe), frames, rate=RATE)

    assert not errors_of(up)
    first, second = contexts_of(probe.frames)
    assert audio_of(probe.frames, first) == audio_of(probe.frames, second)
    server_contexts = {m["context_id"] for _, m in emu.stats.messages if m.get("transcript", "").strip()}
    assert len(server_contexts) == 1
    assert (cache.stats().misses, cache.stats().hits, len(cache)) == (1, 1, 1)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_mixed_session_keeps_its_order_one_audio_context_per_turn(
    emu: Emulator, provider: str
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = service(emu, provider, cache)
    await asyncio.wait_for(cache.warm(tts, [GREETING, BYE], sample_rate=RATE), 10.0)
    before = requests(emu, provider)
    frames = [TTSSpeakFrame(GREETING), *llm_turn(S1), TTSSpeakFrame(BYE)]
    down, up = await run(pipeline(tts), frames, rate=RATE)

    assert not errors_of(up)
    contexts = contexts_of(down)
    assert len(contexts) == 3
    for context_id, text in zip(contexts, (GREETING, S1, BYE), strict=True):
        pcm = audio_of(down, context_id)
        assert len(pcm) / 2 / RATE == pytest.approx(tone_len(text), abs=0.02)
        middle = pcm[len(pcm) // 4 : 3 * len(pcm) // 4]
        assert dominant_frequency(middle, RATE) == pytest.approx(tone_frequency(text), abs=15), text
    # each turn's frames in one run: started, audio, stopped, never interleaved with another turn's
    marks = [
        (type(f).__name__, f.context_id)
        for f in down
        if isinstance(f, (TTSStartedFrame, TTSAudioRawFrame, TTSStoppedFrame))
    ]
    runs = [cid for i, (_, cid) in enumerate(marks) if i == 0 or marks[i - 1][1] != cid]
    assert runs == contexts
    assert [n for n, _ in marks].count("TTSStoppedFrame") == 3
    assert words_of(down) == [*GREETING.split(), *S1.split(), *BYE.split()]
    if provider == "kitta":
        assert emu.stats.kitta_sessions == before + 1
    else:
        sent = [m["transcript"] for _, m in emu.stats.messages[before:] if m.get("transcript", "").strip()]
        assert "".join(sent).strip() == S1
    assert len(cache) == 2  # the LLM turn was not stored


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_barge_in_during_a_cached_prompt_leaves_no_stale_frame(emu: Emulator, provider: str) -> None:
    cache = PhraseCache.memory(max_bytes=32 << 20)
    tts = service(emu, provider, cache)
    await asyncio.wait_for(cache.warm(tts, [MENU, BYE], sample_rate=RATE), 20.0)
    gate, probe = Gate(), Probe(words=3)
    frames = [TTSSpeakFrame(MENU), InterruptWhen(probe.words_seen), TTSSpeakFrame(BYE)]
    before = requests(emu, provider)
    _, up = await run(pipeline(gate, tts, probe), frames, rate=RATE)

    assert gate.fired.is_set() and not errors_of(up)
    assert requests(emu, provider) == before  # no request, no cancel: nothing was on the server
    seen = probe.frames
    cut = next(i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame))
    menu, bye = contexts_of(seen)
    after = seen[cut + 1 :]
    stale = [f for f in after if isinstance(f, (TTSAudioRawFrame, TTSTextFrame)) and f.context_id == menu]
    assert stale == []
    assert not [f for f in seen if isinstance(f, TTSStoppedFrame) and f.context_id == menu]
    heard = audio_of(seen[:cut], menu)
    assert 0 < len(heard) / 2 / RATE < tone_len(MENU) / 2  # cut early in the prompt
    assert len(audio_of(after, bye)) / 2 / RATE == pytest.approx(tone_len(BYE), abs=0.02)


async def test_the_tts_span_says_cache_hit(emu: Emulator, spans: InMemorySpanExporter) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = make_tts(emu, phrase_cache=cache)
    await asyncio.wait_for(cache.warm(tts, [GREETING], sample_rate=RATE), 10.0)
    probe = Probe()
    await run_traced([Gate(), tts, probe], [TTSSpeakFrame(GREETING), WaitFor(probe.stopped), *llm_turn(S1)])

    hit, live = (attrs(s) for s in named(spans, "tts"))
    assert hit["ttsbridge.cache"] == "hit" and hit["ttsbridge.outcome"] == "done"
    assert hit["ttsbridge.characters_sent"] == 0 and hit["ttsbridge.ttfa"] > 0
    assert "ttsbridge.cache" not in live


async def test_the_http_service_serves_speak_frames_from_the_cache_and_llm_text_live(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = http_service(emu, cache)
    probe = Probe()
    frames = [TTSSpeakFrame(GREETING), WaitFor(probe.stopped), TTSSpeakFrame(GREETING), *llm_turn(S1)]
    down, up = await run(pipeline(Gate(), tts, probe), frames, rate=RATE, metrics=True)

    assert not errors_of(up)
    first, second, _llm = contexts_of(probe.frames)
    assert audio_of(probe.frames, first) == audio_of(probe.frames, second)
    assert emu.stats.http_requests == 2  # the first greeting and the LLM sentence
    assert (cache.stats().misses, cache.stats().hits, len(cache)) == (1, 1, 1)
    assert usage_metrics(down) == [len(GREETING), len(S1)]  # the hit is billed nothing


async def test_the_http_service_span_of_a_hit_says_nothing_was_sent(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    tts = http_service(emu, cache)
    await asyncio.wait_for(cache.warm(tts, [GREETING], sample_rate=RATE), 10.0)
    probe = Probe()
    await run_traced([Gate(), tts, probe], [TTSSpeakFrame(GREETING), WaitFor(probe.stopped)])

    (hit,) = (attrs(s) for s in named(spans, "tts"))
    assert hit["ttsbridge.cache"] == "hit" and hit["ttsbridge.characters_sent"] == 0


@pytest.mark.parametrize("cached", [False, True], ids=["live", "cached"])
async def test_an_interrupted_prompt_leaves_only_what_was_heard_in_the_llm_context(
    emu: Emulator, cached: bool
) -> None:
    """The same rule for a cached prompt as for its live render: the words pushed before the cut."""
    emu.config.realtime_factor = 0.0 if cached else 2.0  # live: still streaming when the cut lands
    cache = PhraseCache.memory(max_bytes=32 << 20) if cached else None
    tts = make_tts(emu, phrase_cache=cache)
    if cache is not None:
        await asyncio.wait_for(cache.warm(tts, [MENU], sample_rate=RATE), 20.0)
    context = LLMContext()
    gate, probe = Gate(), Probe(words=3)
    frames = [TTSSpeakFrame(MENU), InterruptWhen(probe.words_seen)]
    await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=RATE)

    assert gate.fired.is_set()
    said = " ".join(str(m.get("content")) for m in context.messages if m.get("role") == "assistant").split()
    assert said and said == MENU.split()[: len(said)]
    assert len(said) < len(MENU.split()) // 2
    pushed = words_of(probe.frames)  # the word frames that went out before the context stopped
    assert said == pushed[: len(said)]
    if cache is not None:
        assert cache.stats().hits == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_miss_cut_by_barge_in_or_a_server_error_is_not_stored(emu: Emulator, provider: str) -> None:
    """A live ``TTSSpeakFrame`` interrupted mid-render, then one the server fails after audio: neither is
    stored; a clean render is. (One cache, a service per pipeline.)"""
    # still streaming when the cut lands: both APIs paced (Kitta's pace is its own knob; unpaced, its whole
    # render can be received, read and kept before the cut reaches the service)
    emu.config.realtime_factor = emu.config.kitta.realtime_factor = 2.0
    cache = PhraseCache.memory(max_bytes=32 << 20)
    gate, probe = Gate(), Probe(words=3)
    frames = [TTSSpeakFrame(MENU), InterruptWhen(probe.words_seen)]
    await run(pipeline(gate, service(emu, provider, cache), probe), frames, rate=RATE)
    assert gate.fired.is_set()
    await cache.flush()
    assert len(cache) == 0 and cache.stats().misses == 1

    emu.config.realtime_factor = 0.0
    marker = "[[kitta:error_after_audio]]" if provider == "kitta" else "[[error:generation_failed:2]]"
    probe = Probe()
    _, up = await run(
        pipeline(Gate(), service(emu, provider, cache), probe), [TTSSpeakFrame(f"{BYE} {marker}")]
    )
    assert errors_of(up) and audio_of(probe.frames, contexts_of(probe.frames)[0])  # failed after audio
    await cache.flush()
    assert len(cache) == 0 and cache.stats().misses == 2

    probe = Probe()
    await run(pipeline(Gate(), service(emu, provider, cache), probe), [TTSSpeakFrame(BYE)], rate=RATE)
    await cache.flush()
    assert len(cache) == 1 and audio_of(probe.frames, contexts_of(probe.frames)[0])


async def test_the_http_service_reports_a_failed_miss_as_without_a_cache(emu: Emulator) -> None:
    """A ``TTSSpeakFrame`` miss that the server cuts after audio was sent and is billed: Pipecat's usage
    metric says so as it does without a cache (it is only left out for a hit); nothing is stored."""
    text = f"{GREETING} [[drop:3]]"
    reported: dict[str, list[int]] = {}
    for name, cache in (("plain", None), ("cached", PhraseCache.memory(max_bytes=8 << 20))):
        tts = http_service(emu, cache)
        probe = Probe()
        down, up = await run(pipeline(Gate(), tts, probe), [TTSSpeakFrame(text)], rate=RATE, metrics=True)
        assert errors_of(up) and audio_of(probe.frames, contexts_of(probe.frames)[0]), name
        reported[name] = usage_metrics(down)
        if cache is not None:
            await cache.flush()
            assert len(cache) == 0
    assert reported["cached"] == reported["plain"] == [len(text)]
