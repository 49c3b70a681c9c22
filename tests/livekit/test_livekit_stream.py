"""``nineninesix.TTS().stream()`` against the emulator: the checks of livekit/agents' test_tts.py,
barge-in on a pooled socket, sample rates, encodings and estimated word timing."""

from __future__ import annotations

import asyncio
import logging

import pytest
from livekit.agents import APIConnectOptions, Plugin, tts, utils
from lk_helpers import (
    BOUND,
    FAST,
    S1,
    S2,
    S3,
    Events,
    check_stream_events,
    duration_of,
    make_tts,
    pcm_of,
    run_stream,
    timed_words,
    tone_len,
    window,
)

from livekit.plugins import nineninesix
from support import wait_until
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_frequency
from ttsbridge.livekit import DEFAULT_CHARS_PER_SECOND


def test_plugin_is_registered_with_its_logger() -> None:
    plugins = [p for p in Plugin.registered_plugins if p.package == "livekit.plugins.nineninesix"]
    assert len(plugins) == 1
    assert plugins[0].logger is logging.getLogger("livekit.plugins.nineninesix")
    assert plugins[0].version == nineninesix.__version__


async def test_capabilities_and_metadata(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        assert t.capabilities.streaming is True
        assert t.capabilities.aligned_transcript is True
        assert (t.sample_rate, t.num_channels) == (24000, 1)
        assert (t.provider, t.model) == ("Nineninesix", "gepard-1.0")
        assert make_tts(emu, word_timestamps=False).capabilities.aligned_transcript is False
    finally:
        await t.aclose()


async def test_stream_one_segment_as_livekit_checks_it(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        events = await run_stream(t, f"{S1} {S2} {S3}")
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert len(ev.metrics) == 1
    m = ev.metrics[0]
    assert m.request_id == events[0].request_id and m.segment_id == events[0].segment_id
    # the characters the provider billed (each sentence trimmed), not LiveKit's len(text) (docs/livekit.md: usage)
    assert m.characters_count == len(S1) + len(S2) + len(S3) == emu.stats.credits_charged
    assert m.audio_duration == pytest.approx(duration_of(events))
    assert m.ttfb > 0 and not m.cancelled and m.streamed
    assert ev.errors == []
    # every sentence spoken, in order, in one context, with continue:true and a closing continue:false
    total = tone_len(S1) + tone_len(S2) + tone_len(S3)
    assert duration_of(events) == pytest.approx(total, abs=0.03)
    pcm = pcm_of(events)
    for s, start in ((S1, 0.0), (S2, tone_len(S1)), (S3, tone_len(S1) + tone_len(S2))):
        got = dominant_frequency(window(pcm, 24000, start + 0.05, tone_len(s) - 0.1), 24000)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    sent = [m for _, m in emu.stats.messages]
    assert {m["context_id"] for m in sent} == {events[0].segment_id}
    assert [m["continue"] for m in sent] == [True] * (len(sent) - 1) + [False]
    assert " ".join(m["transcript"].strip() for m in sent[:-1]) == f"{S1} {S2} {S3}"
    assert emu.stats.ws_connections == 1


async def test_each_sentence_is_sent_as_soon_as_it_is_complete(emu: Emulator) -> None:
    """Sentences go out while the LLM is still producing text (not at end_input)."""
    t = make_tts(emu)
    try:
        async with t.stream(conn_options=FAST) as stream:
            for w in f"{S1} {S2} And".split(" "):
                stream.push_text(w + " ")
            # S1 is released by the tokenizer once S2 has started; it must reach the server before the end
            await wait_until(lambda: len(emu.stats.messages) >= 1, timeout=BOUND)
            assert emu.stats.messages[0][1]["transcript"].strip() == S1
            assert emu.stats.messages[0][1]["continue"] is True
            stream.push_text("this is the end.")
            stream.end_input()
            events = await asyncio.wait_for(_drain(stream), BOUND)
    finally:
        await t.aclose()
    check_stream_events(t, events)


async def _drain(stream: tts.SynthesizeStream) -> list[tts.SynthesizedAudio]:
    return [ev async for ev in stream]


async def test_empty_stream_opens_no_context(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        assert await run_stream(t, []) == []
        assert await run_stream(t, "   ", by_word=False) == []
    finally:
        await t.aclose()
    assert ev.metrics == [] and ev.errors == []
    assert emu.stats.messages == []


@pytest.mark.deprecated_use("handling multiple segments in a single instance is deprecated")
async def test_flush_ends_the_turn_and_later_text_is_dropped(emu: Emulator) -> None:
    """LiveKit 1.8 keeps one segment per stream: text after a flush is dropped, so the flush ends the turn."""
    t = make_tts(emu)
    ev = Events(t)
    try:
        async with t.stream(conn_options=FAST) as stream:
            stream.flush()  # a flush before any text changes nothing
            stream.push_text(S1)
            stream.flush()
            stream.push_text(S2)  # dropped by LiveKit
            events = await asyncio.wait_for(_drain(stream), BOUND)  # completes without end_input()
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.03)
    assert len(ev.metrics) == 1
    assert [m["transcript"].strip() for _, m in emu.stats.messages] == [S1, ""]


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 44100, 48000])
@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_mulaw", "pcm_alaw"])
async def test_rates_and_encodings_reach_livekit_as_pcm16(emu: Emulator, rate: int, encoding: str) -> None:
    t = make_tts(emu, sample_rate=rate, encoding=encoding)
    try:
        events = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.03)
    pcm = pcm_of(events)
    got = dominant_frequency(window(pcm, rate, 0.1, tone_len(S2) - 0.2), rate)
    assert got == pytest.approx(tone_frequency(S2), rel=0.01)
    fmt = emu.stats.messages[0][1]["output_format"]
    assert fmt == {"container": "raw", "encoding": encoding, "sample_rate": rate if rate <= 22050 else 22050}


async def test_consecutive_and_concurrent_streams_share_one_socket(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        a, b = await asyncio.gather(run_stream(t, S1), run_stream(t, S2))
        c = await run_stream(t, S3)
    finally:
        await t.aclose()
    for events, s in ((a, S1), (b, S2), (c, S3)):
        check_stream_events(t, events)
        got = dominant_frequency(window(pcm_of(events), 24000, 0.05, tone_len(s) - 0.1), 24000)
        assert got == pytest.approx(tone_frequency(s), rel=0.01)
    assert len({e.segment_id for e in a + b + c}) == 3
    assert len(ev.metrics) == 3
    assert emu.stats.ws_connections == 1
    # the handshake is paid once: the stream after the concurrent pair says it reused the socket
    assert ev.metrics[-1].connection_reused is True
    assert not all(m.connection_reused for m in ev.metrics)  # the first stream(s) paid it


async def test_barge_in_cancels_the_context_and_the_next_turn_reuses_the_socket(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        # the second sentence stalls on the server: the turn is still speaking when the user barges in
        stream = t.stream(conn_options=FAST)
        stream.push_text(f"{S1} That part never finishes [[stall]] at all.")
        stream.end_input()
        first = await asyncio.wait_for(stream.__anext__(), BOUND)
        assert first.frame.duration > 0
        await asyncio.wait_for(stream.aclose(), BOUND)  # what LiveKit does on interruption
        assert emu.stats.cancels == 1
        # a cut-short turn says nothing about the voice's speaking rate
        assert t.chars_per_second == pytest.approx(DEFAULT_CHARS_PER_SECOND)
        await wait_until(lambda: emu.stats.contexts_cancelled == 1)
        cancel = [m for _, m in emu.stats.messages if m.get("cancel")]
        assert cancel == [{"context_id": first.segment_id, "cancel": True}]

        events = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    # nothing of the cancelled context leaks into the next turn: every full frame is the new sentence's tone
    for e in events[:-1]:
        if e.frame.duration >= 0.05:
            got = dominant_frequency(e.frame.data.tobytes(), 24000)
            assert got == pytest.approx(tone_frequency(S2), rel=0.02)
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.03)
    assert emu.stats.ws_connections == 1, "the next turn must not reconnect"
    # LiveKit emits no metrics for an interrupted stream; the plugin emits them, cancelled (issue 19)
    assert [m.cancelled for m in ev.metrics] == [True, False]
    assert ev.errors == []


async def test_barge_in_the_way_agent_session_does_it(emu: Emulator) -> None:
    """AgentSession's tts_node: text forwarded token by token from a task, frames read in ``async with``; the
    interruption cancels the reading task. The turn is cancelled, the socket kept, the next turn clean."""
    t = make_tts(emu)
    ev = Events(t)
    frames: asyncio.Queue[tts.SynthesizedAudio] = asyncio.Queue()

    async def tts_node(text: str) -> None:
        async with t.stream(conn_options=FAST) as stream:

            async def forward() -> None:
                for w in text.split(" "):
                    stream.push_text(w + " ")
                    await asyncio.sleep(0)  # an LLM yields between tokens
                stream.end_input()

            forward_t = asyncio.create_task(forward())
            try:
                async for e in stream:
                    frames.put_nowait(e)
            finally:
                await utils.aio.cancel_and_wait(forward_t)

    try:
        node = asyncio.create_task(tts_node(f"{S1} That part never finishes [[stall]] at all."))
        await asyncio.wait_for(frames.get(), BOUND)
        await asyncio.wait_for(utils.aio.cancel_and_wait(node), BOUND)
        assert emu.stats.cancels == 1
        events = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.03)
    assert emu.stats.ws_connections == 1
    assert [m.cancelled for m in ev.metrics] == [True, False] and ev.errors == []  # (cut: issue 19)
    await wait_until(lambda: emu.stats.ws_open == 0)


async def test_many_parallel_streams_are_contexts_on_one_socket(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    texts = [S1, S2, S3, "One more thing.", "And the very last one."]
    try:
        results = await asyncio.gather(*(run_stream(t, s) for s in texts))
    finally:
        await t.aclose()
    for events, s in zip(results, texts, strict=True):
        check_stream_events(t, events)
        assert duration_of(events) == pytest.approx(tone_len(s), abs=0.03)
        got = dominant_frequency(window(pcm_of(events), 24000, 0.03, tone_len(s) - 0.06), 24000)
        assert got == pytest.approx(tone_frequency(s), rel=0.02)
    assert len({r[0].segment_id for r in results}) == len(texts)
    assert emu.stats.ws_connections == 1 and len(ev.metrics) == len(texts)


async def test_barge_in_before_any_audio(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        stream = t.stream(conn_options=FAST)
        stream.push_text("[[stall]] Nothing is ever heard of this.")
        stream.end_input()
        await wait_until(lambda: len(emu.stats.messages) >= 1)
        await asyncio.wait_for(stream.aclose(), BOUND)
        assert emu.stats.cancels == 1
        events = await run_stream(t, S3)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert emu.stats.ws_connections == 1


async def test_prewarm_opens_the_socket_the_first_stream_uses(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        t.prewarm()
        await wait_until(lambda: emu.stats.ws_connections == 1)
        events = await run_stream(t, S1)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert emu.stats.ws_connections == 1


async def test_update_options_applies_to_the_next_stream(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        t.update_options(encoding="pcm_mulaw", wire_sample_rate=8000)
        events = await run_stream(t, S1)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert emu.stats.messages[0][1]["output_format"]["encoding"] == "pcm_mulaw"
    assert emu.stats.messages[0][1]["output_format"]["sample_rate"] == 8000
    assert all(e.frame.sample_rate == 24000 for e in events)


def test_invalid_options_are_rejected_before_any_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NINENINESIX_API_KEY", raising=False)
    with pytest.raises(ValueError, match="api_key"):
        nineninesix.TTS()
    with pytest.raises(ValueError, match="encoding"):
        nineninesix.TTS("sk_996_x", encoding="mp3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="model"):
        nineninesix.TTS("sk_996_x", model="sonic-3")
    with pytest.raises(ValueError, match="sample_rate"):
        nineninesix.TTS("sk_996_x", wire_sample_rate=24000)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="sample_rate"):
        nineninesix.TTS("sk_996_x", sample_rate=0)
    t = nineninesix.TTS("sk_996_x")
    with pytest.raises(ValueError, match="encoding"):
        t.update_options(encoding="opus")  # type: ignore[arg-type]
    monkeypatch.setenv("NINENINESIX_API_KEY", "sk_996_from_env")
    assert nineninesix.TTS().options.model == "gepard-1.0"


# --- estimated word timing ----------------------------------------------------------------------


async def test_aligned_transcript_covers_the_text_and_the_audio(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        text = f"{S1} {S2} {S3}"
        first = await run_stream(t, text)
        # the second turn starts from the rate measured on the first one
        second = await run_stream(t, text)
    finally:
        await t.aclose()
    for events in (first, second):
        words = timed_words(events)
        assert "".join(words) == text + " "
        assert words[0].start_time == 0.0
        assert all(w.end_time >= w.start_time for w in words)
        assert [w.start_time for w in words] == sorted(w.start_time for w in words)
        assert words[-1].end_time == pytest.approx(duration_of(events), abs=0.01)
    # calibrated: after one turn the estimate puts each sentence's first word within 150 ms of where it is
    words = timed_words(second)
    starts = {w.strip(): w.start_time for w in words}
    assert starts["I"] == pytest.approx(tone_len(S1), abs=0.15)
    assert starts["Let"] == pytest.approx(tone_len(S1) + tone_len(S2), abs=0.15)
    # each word weighs its characters plus one; the rate converges on what this voice really does
    true_rate = (len(text.split(" ")) + len(text.replace(" ", ""))) / duration_of(second)
    assert t.chars_per_second == pytest.approx(true_rate, rel=0.05)


async def test_word_timestamps_off_sends_no_timed_words(emu: Emulator) -> None:
    t = make_tts(emu, word_timestamps=False)
    try:
        events = await run_stream(t, S1)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert timed_words(events) == []


async def test_a_slow_llm_is_not_a_tts_timeout(emu: Emulator) -> None:
    """While the input is open and the audio has caught up with the text, nothing is owed by the server."""
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=0.3)
        async with t.stream(conn_options=opts) as stream:
            for w in f"{S1} And".split(" "):
                stream.push_text(w + " ")
            got = 0.0
            while got < tone_len(S1) - 0.25:  # S1's audio (the emitter holds back at most one frame)
                got += (await asyncio.wait_for(stream.__anext__(), BOUND)).frame.duration
            await asyncio.sleep(0.6)  # the LLM thinks for twice the timeout: simulated time, not a sync
            stream.push_text("then the rest arrives.")
            stream.end_input()
            rest = await asyncio.wait_for(_drain(stream), BOUND)
    finally:
        await t.aclose()
    assert rest and rest[-1].is_final
    assert ev.errors == [] and len(ev.metrics) == 1
