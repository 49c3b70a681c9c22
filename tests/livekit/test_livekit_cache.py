"""The phrase cache behind ``nineninesix.TTS`` / ``kitta.TTS``: ``session.say(text)`` and ``synthesize(text)``
of a cached phrase send nothing, bill nothing and play the very samples of the live render, through LiveKit's
own path (emitter, aligned transcript, barge-in, metrics). A real ``AgentSession`` plays into a real-time
sink (session_helpers.py), so a barge-in lands while the cached phrase is playing."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, APIError, tts
from lk_helpers import (
    BOUND,
    FAST,
    S1,
    Events,
    duration_of,
    make_tts,
    run_synthesize,
    synthesize_until_error,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from session_helpers import Harness, agent_session, make_provider_tts, sentences
from test_livekit_agent_session import _check_spoken, _norm

from heard import prefix_error, sentence_frequencies
from otel_support import attrs, named
from ttsbridge.cache import PhraseCache
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_frequency
from ttsbridge.livekit import TURN_USAGE_EVENT

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROVIDERS = ["nineninesix", "kitta"]
GREETING = "Hello! How can I help?"
LONG = "Sure, I can help with that. Your table for four is booked for eight tonight. Is there anything else?"
BYE = "Thank you for calling. Goodbye!"
REPLY = "Of course. What else can I do?"
#: where the user barges in: 0.38 s into LONG's second sentence, inside "table"
BARGE_IN_AT = 2.0


def requests(emu: Emulator, provider: str) -> int:
    """What reached the server: Nineninesix client messages and HTTP requests, Kitta sessions."""
    if provider == "kitta":
        return emu.stats.kitta_sessions
    return len(emu.stats.messages) + emu.stats.http_requests


def _tts(emu: Emulator, provider: str, cache: PhraseCache, **kw: Any) -> tts.TTS:
    return make_provider_tts(emu, provider, phrase_cache=cache, **kw)


async def _say(h: Harness, text: str) -> None:
    handle = h.session.say(text)
    await asyncio.wait_for(handle.wait_for_playout(), BOUND)


def _check_played(h: Harness, t: tts.TTS, text: str) -> bytes:
    """The last played segment is ``text``, in full (test_livekit_agent_session's check); its PCM."""
    _check_spoken(h, t, text)
    return h.player.segments[-1].pcm


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_repeated_say_sends_nothing_bills_nothing_and_plays_the_same_samples(
    emu: Emulator, provider: str
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, provider, cache)
    usages: list[Any] = []
    t.on(TURN_USAGE_EVENT, usages.append)
    events = Events(t)
    try:
        async with agent_session(t, {}) as h:
            await _say(h, LONG)
            live = _check_played(h, t, LONG)
            await cache.flush()
            assert len(cache) == 1 and cache.stats().misses == 1
            before = requests(emu, provider)
            await _say(h, LONG)
            cached = _check_played(h, t, LONG)
            assert requests(emu, provider) == before, "a hit sent nothing to the server"
            # the very samples of the live render (LiveKit may end a segment with a 10 ms silent marker frame,
            # depending on timing: trailing silence is not compared)
            assert cached.rstrip(b"\0") == live.rstrip(b"\0")
            assert cache.stats().hits == 1
            msgs = h.assistant_messages()
            assert [_norm(m.text_content or "") for m in msgs] == [LONG, LONG]
            assert _norm(h.text.segments[-1]) == LONG  # the aligned transcript, word by word
    finally:
        await t.aclose()
    live_usage, hit_usage = usages
    assert live_usage.characters_billed > 0 and live_usage.characters_cached == 0
    assert hit_usage.characters_billed == 0 and hit_usage.characters_sent == 0
    assert hit_usage.characters_cached == len(LONG)
    assert hit_usage.audio_seconds == pytest.approx(live_usage.audio_seconds, abs=0.01)
    counts = [m.characters_count for m in events.metrics]
    assert counts[-1] == 0 and counts[0] > 0  # LiveKit's TTSMetrics bill the hit nothing


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_warmed_phrase_plays_the_samples_of_a_live_say(emu: Emulator, provider: str) -> None:
    plain = make_provider_tts(emu, provider)  # no cache: today's live render
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, provider, cache)
    try:
        async with agent_session(plain, {}) as h:
            await _say(h, LONG)
            live = _check_played(h, plain, LONG)
        assert (await asyncio.wait_for(cache.warm(t, [LONG]), BOUND)).stored == 1
        made = requests(emu, provider)
        async with agent_session(t, {}) as h:
            await _say(h, LONG)
            cached = _check_played(h, t, LONG)
        assert requests(emu, provider) == made and cache.stats().hits == 1
    finally:
        await plain.aclose()
        await t.aclose()
    assert cached.rstrip(b"\0") == live.rstrip(b"\0")  # warm() renders as say() does


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_barge_in_during_a_cached_say_keeps_the_heard_prefix_and_no_stale_frame(
    emu: Emulator, provider: str
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, provider, cache)
    try:
        report = await asyncio.wait_for(cache.warm(t, [LONG]), BOUND)
        assert report.stored == 1
        before = requests(emu, provider)
        async with agent_session(t, {"more": REPLY}) as h:
            handle = h.session.say(LONG)
            seg = await h.player.wait_played(BARGE_IN_AT)
            await asyncio.wait_for(h.session.interrupt(), BOUND)
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            assert handle.interrupted and seg.interrupted
            assert requests(emu, provider) == before  # the cached phrase sent nothing, not even a cancel
            msg = h.assistant_messages()[-1]
            kept = msg.text_content or ""
            assert msg.interrupted and LONG.startswith(_norm(kept)) and _norm(kept) != LONG
            err = prefix_error(kept, sentences(LONG), seg.played)
            assert abs(err.words) <= 1, err  # as for live audio (test_livekit_agent_session)
            played_at_cut = seg.played

            handle = h.session.generate_reply(user_input="more")  # a live LLM reply next
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            _check_played(h, t, REPLY)
            assert seg.played == played_at_cut, "no audio of the cut phrase after the barge-in"
    finally:
        await t.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_mixed_session_keeps_its_order_and_only_the_llm_turn_reaches_the_server(
    emu: Emulator, provider: str
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, provider, cache)
    try:
        await asyncio.wait_for(cache.warm(t, [GREETING, BYE]), BOUND)
        before = requests(emu, provider)
        async with agent_session(t, {"book": REPLY}) as h:
            greeting = h.session.say(GREETING)
            reply = h.session.generate_reply(user_input="book")
            bye = h.session.say(BYE)
            for handle in (greeting, reply, bye):
                await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            played = h.player.segments
            assert len(played) == 3 and not any(s.interrupted for s in played)
            for seg, text in zip(played, (GREETING, REPLY, BYE), strict=True):
                parts = sentences(text)
                got = sentence_frequencies(seg.pcm, t.sample_rate, parts)
                assert got == pytest.approx([tone_frequency(s) for s in parts], rel=0.01), text
            assert [_norm(m.text_content or "") for m in h.assistant_messages()] == [GREETING, REPLY, BYE]
    finally:
        await t.aclose()
    assert cache.stats().hits == 2
    assert len(cache) == 2  # the LLM reply was not stored: LLM-streamed text is never cached
    if provider == "kitta":
        assert emu.stats.kitta_sessions == before + 1
        assert emu.stats.kitta_segment_texts[-len(sentences(REPLY)) :] == sentences(REPLY)
    else:
        sent = [
            m["transcript"].strip() for _, m in emu.stats.messages[before:] if m.get("transcript", "").strip()
        ]
        assert " ".join(sent) == REPLY


async def test_synthesize_of_a_cached_text_sends_nothing_and_is_billed_nothing(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    events = Events(t)
    try:
        live = await run_synthesize(t, GREETING, conn_options=FAST)
        await cache.flush()
        before = requests(emu, "nineninesix")
        hit = await run_synthesize(t, GREETING, conn_options=FAST)
        assert requests(emu, "nineninesix") == before
    finally:
        await t.aclose()
    pcm = [b"".join(e.frame.data.tobytes() for e in ev) for ev in (live, hit)]
    assert pcm[0] == pcm[1] and pcm[0]
    assert [m.characters_count for m in events.metrics] == [len(GREETING), 0]
    first, second = (attrs(s) for s in named(spans, "tts_request_run"))
    assert first["ttsbridge.cache"] == "miss" and second["ttsbridge.cache"] == "hit"


async def test_a_synthesize_span_of_a_hit_says_nothing_was_sent(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    try:
        await asyncio.wait_for(cache.warm(t, [GREETING]), BOUND)
        assert await run_synthesize(t, GREETING, conn_options=FAST)
    finally:
        await t.aclose()
    (run,) = named(spans, "tts_request_run")
    a = attrs(run)
    assert a["ttsbridge.cache"] == "hit" and a["ttsbridge.characters_sent"] == 0  # as for a stream's hit


async def test_a_stream_span_says_cache_hit(emu: Emulator, spans: InMemorySpanExporter) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    try:
        await asyncio.wait_for(cache.warm(t, [GREETING]), BOUND)
        async with t.stream(conn_options=FAST) as stream:
            stream.push_text(GREETING)
            stream.end_input()
            events = await asyncio.wait_for(_collect(stream), BOUND)
    finally:
        await t.aclose()
    assert events
    (run,) = named(spans, "tts_request_run")
    a = attrs(run)
    assert a["ttsbridge.cache"] == "hit" and a["ttsbridge.outcome"] == "done"
    assert a["ttsbridge.characters_sent"] == 0


async def test_a_say_after_update_options_misses_then_hits(emu: Emulator) -> None:
    clone = emu.voices.clone(name="second voice", clip=b"not a wav: a fixed tone from the bytes")
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    try:
        await asyncio.wait_for(cache.warm(t, [GREETING]), BOUND)
        async with agent_session(t, {}) as h:
            t.update_options(voice=clone.id)  # type: ignore[attr-defined]
            made = requests(emu, "nineninesix")
            await _say(h, GREETING)  # another voice: another key, a live render
            assert requests(emu, "nineninesix") > made
            await cache.flush()
            made = requests(emu, "nineninesix")
            await _say(h, GREETING)  # now cached for that voice too
            assert requests(emu, "nineninesix") == made
            got = sentence_frequencies(h.player.segments[-1].pcm, t.sample_rate, sentences(GREETING))
            assert got == pytest.approx([clone.frequency] * len(got), rel=0.01)  # the new voice's audio
    finally:
        await t.aclose()
    assert (cache.stats().misses, cache.stats().hits, len(cache)) == (1, 1, 2)


async def test_text_streamed_like_an_llm_is_rendered_live_every_time(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    try:
        for _ in range(2):
            async with t.stream(conn_options=FAST) as stream:
                for word in GREETING.split(" "):
                    stream.push_text(word + " ")
                    await asyncio.sleep(0)  # tokens arrive over time, as from an LLM
                stream.end_input()
                await asyncio.wait_for(_collect(stream), BOUND)
    finally:
        await t.aclose()
    assert len(cache) == 0 and cache.stats().hits == cache.stats().misses == 0
    contexts = {m["context_id"] for _, m in emu.stats.messages if m.get("transcript", "").strip()}
    assert len(contexts) == 2


async def _collect(stream: tts.SynthesizeStream) -> list[tts.SynthesizedAudio]:
    return [ev async for ev in stream]


async def test_the_worker_example_prewarms_a_file_every_job_process_shares(
    emu: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NINENINESIX_BASE_URL", emu.base_url)
    monkeypatch.setenv("NINENINESIX_API_KEY", emu.api_key)
    monkeypatch.setenv("NINENINESIX_VOICE", TONE_VOICE_ID)
    monkeypatch.setenv("PHRASE_CACHE", str(tmp_path / "phrases.db"))
    spec = importlib.util.spec_from_file_location(
        "livekit_phrase_cache_example", EXAMPLES / "livekit_phrase_cache.py"
    )
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)

    first, second = SimpleNamespace(userdata={}), SimpleNamespace(userdata={})
    await asyncio.wait_for(asyncio.to_thread(example.prewarm, first), BOUND)  # setup_fnc: no loop of its own
    made = requests(emu, "nineninesix")
    await asyncio.wait_for(asyncio.to_thread(example.prewarm, second), BOUND)  # the next job process
    assert requests(emu, "nineninesix") == made
    assert first.userdata["phrase_cache_warm"].stored == len(example.PHRASES)
    assert second.userdata["phrase_cache_warm"].cached == len(example.PHRASES)

    cache = example.open_cache()  # a job: its own cache on the same file
    t = example.build_tts(cache)
    try:
        async with agent_session(t, {}) as h:
            await _say(h, example.GREETING)
            _check_played(h, t, example.GREETING)
        assert requests(emu, "nineninesix") == made and cache.stats().hits == 1
    finally:
        await t.aclose()
        await cache.aclose()


@pytest.mark.parametrize(
    ("cut", "timeout"), [("[[drop:10]]", 5.0), ("[[stall:10]]", 0.3)], ids=["cut", "stalled"]
)
async def test_a_synthesize_miss_cut_after_audio_fails_as_without_a_cache_and_stores_nothing(
    emu: Emulator, cut: str, timeout: float
) -> None:
    """A ``synthesize()`` miss whose server cuts the body (or stalls, and the plugin's timeout gives it up)
    after audio: the typed APIError and every frame received, as without a cache; nothing stored."""
    delivered: dict[str, float] = {}
    for name, cache in (("plain", None), ("cached", PhraseCache.memory(max_bytes=8 << 20))):
        t = make_tts(emu, phrase_cache=cache)
        try:
            opts = APIConnectOptions(max_retry=0, timeout=timeout)
            events, err = await synthesize_until_error(t, f"{S1} {cut}", opts)
        finally:
            await t.aclose()
        assert isinstance(err, APIError) and err.retryable is False, name
        delivered[name] = duration_of(events)
        if cache is not None:
            await cache.flush()
            assert len(cache) == 0 and cache.stats().misses == 1
    assert delivered["cached"] == pytest.approx(delivered["plain"], abs=0.012)
    assert delivered["plain"] >= 10 * emu.config.chunk_ms / 1000 - 0.002


async def test_a_synthesize_hit_left_early_bills_nothing(emu: Emulator) -> None:
    """A ``synthesize()`` of a cached phrase closed after its first frame (the caller moved on): LiveKit's
    TTSMetrics must not bill it ``len(text)`` as it does a live one; the usage says cancelled, cached."""
    cache = PhraseCache.memory(max_bytes=8 << 20)
    t = _tts(emu, "nineninesix", cache)
    events = Events(t)
    usages: list[Any] = []
    t.on(TURN_USAGE_EVENT, usages.append)
    try:
        assert await run_synthesize(t, LONG, conn_options=FAST)  # the miss, stored
        await cache.flush()
        events.metrics.clear()
        usages.clear()
        made = requests(emu, "nineninesix")
        async with t.synthesize(LONG, conn_options=FAST) as stream:
            async for _ev in stream:
                break
        assert requests(emu, "nineninesix") == made and cache.stats().hits == 1
    finally:
        await t.aclose()
    assert [(m.characters_count, m.cancelled) for m in events.metrics] == [(0, True)]
    (usage,) = usages
    assert usage.characters_billed == 0 and usage.characters_cached == len(LONG)
    assert usage.ended is not None and usage.ended.value == "cancelled"
