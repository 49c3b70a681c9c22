"""``kitta.TTS`` in LiveKit against the emulator's Kitta endpoint: the same adapter as Nineninesix, so the same
checks — segments, rates, barge-in, errors with and without delivered audio, timeouts, no key anywhere."""

from __future__ import annotations

import asyncio
import logging
import traceback
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, APIError, APIStatusError, APITimeoutError, Plugin
from lk_helpers import (
    BOUND,
    FAST,
    S1,
    S2,
    S3,
    Events,
    check_stream_events,
    duration_of,
    pcm_of,
    run_stream,
    run_synthesize,
    stream_until_error,
    timed_words,
    tone_len,
    window,
)

from livekit.plugins import kitta
from support import wait_until
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, tone_frequency
from ttsbridge.emulator.kitta import KittaConfig

FAST_CLIENT = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0}


def make_kitta(emu: Emulator, **kw: Any) -> kitta.TTS:
    kw.setdefault("voice", TONE_VOICE_ID)
    kw.setdefault("client_options", dict(FAST_CLIENT))
    return kitta.TTS(emu.config.kitta.a_valid_key(), base_url=emu.base_url, **kw)


def test_plugin_is_registered_with_its_logger() -> None:
    plugins = [p for p in Plugin.registered_plugins if p.package == "livekit.plugins.kitta"]
    assert len(plugins) == 1
    assert plugins[0].logger is logging.getLogger("livekit.plugins.kitta")


async def test_stream_from_the_standby_as_livekit_checks_it(emu: Emulator) -> None:
    t = make_kitta(emu)
    ev = Events(t)
    try:
        assert t.capabilities.streaming and t.capabilities.aligned_transcript
        assert (t.provider, t.model) == ("Kitta", "fishaudio-s21pro-flash")
        t.prewarm()
        await wait_until(
            lambda: t.options is not None and emu.stats.kitta_connections >= 1
        )  # the warm connection
        events = await run_stream(t, f"{S1} {S2} {S3}")
        hits = t.turn_provider.dialer.hits  # type: ignore[attr-defined]
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert hits == 1, "the turn adopted the warm session"
    assert len(ev.metrics) == 1 and ev.errors == []
    assert duration_of(events) == pytest.approx(tone_len(S1) + tone_len(S2) + tone_len(S3), abs=0.05)
    pcm = pcm_of(events)
    for s, start in ((S1, 0.0), (S2, tone_len(S1)), (S3, tone_len(S1) + tone_len(S2))):
        got = dominant_frequency(window(pcm, 24000, start + 0.05, tone_len(s) - 0.1), 24000)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    assert emu.stats.kitta_segment_texts == [S1, S2, S3]  # one flushed segment per sentence, in order
    words = timed_words(events)
    assert "".join(words) == f"{S1} {S2} {S3} "
    assert words[-1].end_time == pytest.approx(duration_of(events), abs=0.01)


@pytest.mark.parametrize("rate", [16000, 48000])
async def test_rates(emu: Emulator, rate: int) -> None:
    t = make_kitta(emu, sample_rate=rate, standby=False)
    try:
        events = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    got = dominant_frequency(window(pcm_of(events), rate, 0.1, tone_len(S2) - 0.2), rate)
    assert got == pytest.approx(tone_frequency(S2), rel=0.01)


async def test_barge_in_closes_the_session_and_the_next_turn_is_clean(emu: Emulator) -> None:
    t = make_kitta(emu)
    ev = Events(t)
    try:
        stream = t.stream(conn_options=FAST)
        stream.push_text(f"{S1} This one never finishes [[kitta:stall]] at all.")
        stream.end_input()
        first = await asyncio.wait_for(stream.__anext__(), BOUND)
        assert first.frame.duration > 0
        await asyncio.wait_for(stream.aclose(), BOUND)
        await wait_until(lambda: emu.stats.kitta_client_closes >= 1)
        events = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    for e in events[:-1]:
        if e.frame.duration >= 0.05:
            assert dominant_frequency(e.frame.data.tobytes(), 24000) == pytest.approx(
                tone_frequency(S2), rel=0.02
            )
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.05)
    # the interrupted stream's metrics (cancelled, its bill: issue 19), then the next one's
    assert [m.cancelled for m in ev.metrics] == [True, False] and ev.errors == []


async def test_non_retryable_error_is_not_retried(emu: Emulator) -> None:
    t = make_kitta(emu, standby=False)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=2, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, f"{S1} [[kitta:error=invalid_request]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIStatusError) and err.retryable is False
    assert err.body["error_code"] == "invalid_request"  # type: ignore[index]
    assert events == []
    assert [e.recoverable for e in ev.errors] == [False]


async def test_quota_exceeded_fails_one_stream_once_and_the_next_stream_speaks(emu: Emulator) -> None:
    """Kitta's quota error is not retryable (the same session would exceed the same limit), so LiveKit's
    max_retry=3 makes no second attempt; the TTS is not written off: the next stream is a new session."""
    emu.config.kitta.max_session_units = 10
    t = make_kitta(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=3, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, S1, opts)
        assert isinstance(err, APIStatusError) and err.retryable is False
        assert err.body["error_code"] == "quota_exceeded"  # type: ignore[index]
        assert emu.stats.kitta_errors == ["quota_exceeded"]  # one attempt
        emu.config.kitta.max_session_units = 100_000
        after = await run_stream(t, S2)
    finally:
        await t.aclose()
    assert events == []
    assert [e.recoverable for e in ev.errors] == [False]
    check_stream_events(t, after)
    assert duration_of(after) == pytest.approx(tone_len(S2), abs=0.05)


async def test_retryable_error_before_audio_is_retried_by_livekit(emu: Emulator) -> None:
    t = make_kitta(emu, standby=False, client_options={**FAST_CLIENT, "max_retries": 0})
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=2, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, f"{S1} [[kitta:error=internal_error:retryable]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIStatusError) and err.retryable is True
    assert events == []
    assert [e.recoverable for e in ev.errors] == [True, True, False]
    assert len(set(emu.stats.kitta_request_ids)) == 3, "a fresh generation (request_id) per attempt"


async def test_error_after_audio_is_never_retried(emu: Emulator) -> None:
    t = make_kitta(emu, standby=False)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=3, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, f"{S1} [[kitta:error_after_audio]]", opts)
    finally:
        await t.aclose()
    assert err.retryable is False
    assert events
    assert [e.recoverable for e in ev.errors] == [False]


async def test_a_stalled_turn_times_out_and_its_session_is_closed(emu: Emulator) -> None:
    t = make_kitta(emu, standby=False)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=0.3)
        _, err = await stream_until_error(t, f"[[kitta:stall]] {S1}", opts)
        assert isinstance(err, APITimeoutError)
        await wait_until(lambda: emu.stats.kitta_client_closes >= 1)
        events = await run_stream(t, S3)
    finally:
        await t.aclose()
    check_stream_events(t, events)


async def test_synthesize(emu: Emulator) -> None:
    t = make_kitta(emu)
    ev = Events(t)
    try:
        events = await run_synthesize(t, S1)
    finally:
        await t.aclose()
    assert events[-1].is_final and not any(e.is_final for e in events[:-1])
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.05)
    assert len(ev.metrics) == 1


def test_invalid_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITTA_API_KEY", raising=False)
    with pytest.raises(ValueError, match="api_key"):
        kitta.TTS(voice="v")
    with pytest.raises(ValueError, match="model"):
        kitta.TTS("kitta_x", voice="v", model="sonic-3")
    with pytest.raises(ValueError, match="speed"):
        kitta.TTS("kitta_x", voice="v", speed=5.0)
    with pytest.raises(ValueError, match="instructions"):
        kitta.TTS("kitta_x", voice="v", instructions="whisper")  # not a fishaudio field


async def test_the_key_never_reaches_a_url_a_log_or_an_exception(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    good, wrong = "kitta_good_Qw8eRt5yU1", "kitta_wrong_Zx7cVb2nM9"
    seen: list[str] = []
    config = EmulatorConfig(default_voice=TONE_VOICE_ID, kitta=KittaConfig(api_keys={good}))
    async with Emulator(config) as emu:
        fast = APIConnectOptions(max_retry=0, timeout=2.0)
        for key, text in ((wrong, S1), (good, f"{S1} [[kitta:error=invalid_request]]")):
            t = kitta.TTS(
                key, voice=TONE_VOICE_ID, base_url=emu.base_url, standby=False, client_options=FAST_CLIENT
            )
            try:
                seen.append(repr(t))
                with pytest.raises(APIError) as info:
                    await run_stream(t, text, conn_options=fast)
                seen += [str(info.value), repr(info.value), "".join(traceback.format_exception(info.value))]
            finally:
                await t.aclose()
        urls = list(emu.stats.kitta_handshake_urls)
    seen.append(caplog.text)
    blob = "\n".join(seen + [str(u) for u in urls])
    assert urls, "handshakes were made"
    assert "invalid_request" in blob
    for key in (good, wrong):
        assert key not in blob


@pytest.mark.parametrize("code", [1012, 1013])
async def test_close_1012_1013_before_audio_is_retried(emu: Emulator, code: int) -> None:
    t = make_kitta(emu, standby=False)
    try:
        events = await run_stream(t, f"{S1} [[kitta:close={code}:times=1]]", by_word=False)
    finally:
        await t.aclose()
    pcm = pcm_of(events)
    assert dominant_frequency(window(pcm, t.sample_rate, 0.1, 0.4), t.sample_rate) == pytest.approx(
        tone_frequency(S1), rel=0.01
    )
    assert code in emu.stats.kitta_server_closes


async def test_text_over_the_per_event_limit_is_split_and_spoken_whole(emu: Emulator) -> None:
    # 2,300 characters with no sentence boundary: over Kitta's 2,000 per text event, which the server enforces.
    long_text = " ".join(["word"] * 460)
    t = make_kitta(emu, standby=False, sample_rate=8000)
    try:
        events = await run_stream(t, long_text, by_word=False)
    finally:
        await t.aclose()
    assert "text_too_long" not in emu.stats.kitta_errors
    assert duration_of(events) == pytest.approx(tone_len(long_text), rel=0.02)


@pytest.mark.parametrize(
    ("after", "timeout"),
    [
        ("[[kitta:error_after_audio]]", 5.0),  # the server's error after its first audio frame
        ("This part [[kitta:stall]] never comes.", 0.3),  # a stall after S1: the plugin's timeout gives up
    ],
)
async def test_a_turn_failing_after_audio_still_delivers_every_frame_received(
    emu: Emulator, after: str, timeout: float
) -> None:
    # At 16 kHz (the server's 24 kHz resampled) our resampler holds the filter's tail of what was received
    # when the turn fails (and a stalled turn its queued frames): delivered before the error, not dropped.
    t = make_kitta(emu, standby=False, sample_rate=16000)
    try:
        events, err = await stream_until_error(
            t, f"{S1} {after}", APIConnectOptions(max_retry=0, timeout=timeout)
        )
    finally:
        await t.aclose()
    assert err.retryable is False
    if "stall" in after:
        assert isinstance(err, APITimeoutError)
        sent = tone_len(S1)  # the first sentence's segment, whole (its last frame is a short one)
    else:
        sent = emu.stats.kitta_audio_frames * emu.config.kitta.chunk_ms / 1000
        assert emu.stats.kitta_audio_frames >= 1
    got = sum(e.frame.duration for e in events)
    # (+10 ms: LiveKit ends a segment whose audio its flush timer already sent with a 10 ms silent marker)
    assert sent - 0.002 <= got <= sent + 0.012, (got, sent)
