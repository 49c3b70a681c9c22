"""Errors, timeouts and retries of ``nineninesix.TTS`` in LiveKit, against the emulator's faults."""

from __future__ import annotations

import asyncio
import logging
import traceback

import pytest
from livekit.agents import (
    APIConnectionError,
    APIConnectOptions,
    APIError,
    APIStatusError,
    APITimeoutError,
    tts,
)
from lk_helpers import (
    BOUND,
    FAST,
    S1,
    S2,
    Events,
    check_stream_events,
    duration_of,
    make_tts,
    pcm_of,
    run_stream,
    run_synthesize,
    stream_until_error,
    synthesize_until_error,
    timed_words,
    tone_len,
    window,
)

from support import wait_until
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault, tone_frequency

NO_RETRY_BACKOFF = {"retry_backoff": 0.001}

#: The WebSocket error catalog: (status, retryable, closes the socket), as the spec documents it.
CATALOG = {
    "unknown_model": (400, False, True),
    "concurrent_limit": (429, True, False),
    "insufficient_credits": (402, False, True),
    "voice_not_found": (404, False, True),
    "unsupported_container": (400, False, True),
    "unsupported_encoding": (400, False, True),
    "invalid_sample_rate": (400, False, True),
    "generation_failed": (500, True, False),
    "not_initialized": (503, True, True),
    "context_not_found": (404, False, False),
    "missing_context_id": (400, False, False),
}


def contexts_seen(emu: Emulator) -> set[str]:
    return {m["context_id"] for _, m in emu.stats.messages if "context_id" in m}


# --- the catalog -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(CATALOG))
async def test_every_catalog_error_becomes_an_api_status_error(emu: Emulator, code: str) -> None:
    status, retryable, closes = CATALOG[code]
    t = make_tts(emu, client_options=NO_RETRY_BACKOFF)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=1.0)
        events, err = await stream_until_error(t, f"{S1} [[error:{code}]]", opts)
        assert isinstance(err, APIStatusError)
        assert err.status_code == status
        assert err.retryable is retryable
        assert err.body["error_code"] == code  # type: ignore[index]
        assert err.request_id  # the server's request id, for support tickets
        assert events == []
        assert len(ev.errors) == 1 and ev.errors[0].recoverable is False
        assert ev.metrics == []
        # the next turn works: a socket the server closed is never handed out again
        after = await run_stream(t, S2)
    finally:
        await t.aclose()
    check_stream_events(t, after)
    assert emu.stats.ws_connections == (2 if closes else 1)


@pytest.mark.parametrize("code", ["voice_not_found", "generation_failed"])
async def test_the_servers_error_wins_over_text_still_arriving(emu: Emulator, code: str) -> None:
    """The LLM keeps streaming after the server failed the turn: LiveKit sees the server's error."""
    t = make_tts(emu)
    try:
        with pytest.raises(APIStatusError) as info:
            async with t.stream(conn_options=FAST) as stream:
                for w in f"{S1} [[error:{code}]] {S2} And".split(" "):
                    stream.push_text(w + " ")
                await wait_until(lambda: len(emu.stats.errors_sent) == 1)
                stream.push_text("more words after the failure. ")
                stream.push_text("And even more of them here.")
                stream.end_input()
                await asyncio.wait_for(_drain(stream), BOUND)
    finally:
        await t.aclose()
    assert info.value.body["error_code"] == code  # type: ignore[index]


async def _drain(stream: tts.SynthesizeStream) -> list[tts.SynthesizedAudio]:
    return [ev async for ev in stream]


async def test_concurrent_limit_is_retried_on_a_fresh_context_by_the_provider(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="Hello", action="error", error_code="concurrent_limit", times=1))
    t = make_tts(emu, client_options=NO_RETRY_BACKOFF)
    ev = Events(t)
    try:
        events = await run_stream(t, S1)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.03)
    assert ev.errors == [] and len(ev.metrics) == 1
    assert len(contexts_seen(emu)) == 2


# --- retries -----------------------------------------------------------------------------------------------------


async def test_retryable_error_before_audio_is_retried_max_retry_times(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=2, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, f"{S1} [[error:generation_failed]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIStatusError) and err.status_code == 500
    assert events == []
    assert [e.recoverable for e in ev.errors] == [True, True, False]
    assert ev.metrics == []
    assert len(contexts_seen(emu)) == 3, "one fresh context per attempt"


async def test_a_retry_that_succeeds_delivers_the_turn_once(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="Hello", action="error", error_code="generation_failed", times=1))
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=2, retry_interval=0.0, timeout=5.0)
        events = await run_stream(t, S1, conn_options=opts)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.03)
    assert [e.recoverable for e in ev.errors] == [True]
    assert len(ev.metrics) == 1
    assert len(contexts_seen(emu)) == 2
    assert emu.stats.ws_connections == 1


async def test_nothing_is_retried_once_audio_reached_the_emitter(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=3, retry_interval=0.0, timeout=5.0)
        events, err = await stream_until_error(t, f"{S1} [[error:generation_failed:10]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIStatusError) and err.status_code == 500
    assert err.retryable is False, "audio was heard: a retry would replay it"
    assert events and sum(e.frame.duration for e in events) > 0.1
    assert [e.recoverable for e in ev.errors] == [False]
    assert len(contexts_seen(emu)) == 1


# --- timeouts ----------------------------------------------------------------------------------------------------


async def test_a_stalled_stream_times_out_in_bounded_time_and_is_cancelled(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=0.3)
        events, err = await stream_until_error(t, f"[[stall]] {S1}", opts)
        assert isinstance(err, APITimeoutError)
        assert events == []
        assert emu.stats.cancels == 1, "the abandoned context is cancelled on the server"
        # with retries: every attempt times out, is cancelled, and the socket stays usable
        opts = APIConnectOptions(max_retry=2, timeout=0.3, retry_interval=0.0)
        _, err = await stream_until_error(t, f"[[stall]] {S1}", opts)
        assert isinstance(err, APITimeoutError)
        after = await run_stream(t, S2)
    finally:
        await t.aclose()
    assert [e.recoverable for e in ev.errors] == [False, True, True, False]
    assert emu.stats.cancels == 4
    assert len(ev.metrics) == 1  # only the last, successful stream
    check_stream_events(t, after)
    assert emu.stats.ws_connections == 1


async def test_a_slow_first_chunk_times_out(emu: Emulator) -> None:
    emu.config.first_chunk_latency_s = 3.0
    t = make_tts(emu)
    try:
        _, err = await stream_until_error(t, S1, APIConnectOptions(max_retry=0, timeout=0.3))
    finally:
        await t.aclose()
    assert isinstance(err, APITimeoutError)


async def test_a_stall_mid_audio_after_the_input_ended_times_out_without_retry(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=3, timeout=0.3, retry_interval=0.0)
        events, err = await stream_until_error(t, f"{S1} [[stall:5]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APITimeoutError) and err.retryable is False
    assert events
    assert [e.recoverable for e in ev.errors] == [False]


# --- dropped sockets ---------------------------------------------------------------------------------------------


async def test_socket_dropped_mid_stream_fails_the_turn_and_the_next_turn_reconnects(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=3, timeout=5.0, retry_interval=0.0)
        events, err = await stream_until_error(t, f"{S1} [[drop:5]]", opts)
        assert isinstance(err, APIConnectionError) and err.retryable is False
        assert events
        after = await run_stream(t, S2)
    finally:
        await t.aclose()
    assert [e.recoverable for e in ev.errors] == [False]
    check_stream_events(t, after)
    got = dominant_frequency(window(pcm_of(after), 24000, 0.05, tone_len(S2) - 0.1), 24000)
    assert got == pytest.approx(tone_frequency(S2), rel=0.01)
    assert emu.stats.ws_connections == 2


async def test_socket_dropped_before_audio_is_retried_on_a_new_socket(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="Hello", action="drop", times=1))
    t = make_tts(emu)
    ev = Events(t)
    try:
        opts = APIConnectOptions(max_retry=1, timeout=5.0, retry_interval=0.0)
        events = await run_stream(t, S1, conn_options=opts)
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.03)
    assert [e.recoverable for e in ev.errors] == [True]
    assert emu.stats.ws_connections == 2


async def test_a_socket_lost_between_turns_is_replaced(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        await run_stream(t, S1)
        assert await emu.drop_connections() == 1
        events = await run_stream(t, S2, conn_options=APIConnectOptions(max_retry=1, retry_interval=0.0))
    finally:
        await t.aclose()
    check_stream_events(t, events)
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.03)
    assert len(ev.metrics) == 2
    assert emu.stats.ws_connections == 2


# --- synthesize(): POST /tts/sse ---------------------------------------------------------------------------------


async def test_synthesize_streams_sse_audio_as_livekit_checks_it(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        events = await run_synthesize(t, S1)
    finally:
        await t.aclose()
    assert events and len({e.request_id for e in events}) == 1 and events[0].request_id
    assert events[-1].is_final and not any(e.is_final for e in events[:-1])
    assert all(0 < e.frame.duration < 0.25 for e in events)
    assert all(e.frame.sample_rate == 24000 and e.frame.num_channels == 1 for e in events)
    assert duration_of(events) == pytest.approx(tone_len(S1), abs=0.03)
    got = dominant_frequency(window(pcm_of(events), 24000, 0.05, tone_len(S1) - 0.1), 24000)
    assert got == pytest.approx(tone_frequency(S1), rel=0.01)
    assert "".join(timed_words(events)) == S1 + " " or "".join(timed_words(events)) == S1
    assert len(ev.metrics) == 1 and ev.errors == []
    assert emu.stats.ws_connections == 0 and emu.stats.http_requests == 1


async def test_synthesize_with_livekits_shared_http_session(emu: Emulator) -> None:
    from livekit.agents.utils import http_context

    async with http_context.open() as session:
        t = make_tts(emu)
        try:
            assert await t.turn_provider.http.session() is session  # type: ignore[attr-defined]
            events = await run_synthesize(t, S2)
        finally:
            await t.aclose()
        assert not session.closed, "the job's session is not the plugin's to close"
    assert duration_of(events) == pytest.approx(tone_len(S2), abs=0.03)


async def test_synthesize_errors(emu: Emulator) -> None:
    t = make_tts(emu)
    ev = Events(t)
    try:
        with pytest.raises(APIStatusError) as info:
            await run_synthesize(t, f"{S1} [[error:generation_failed]]")
        assert info.value.status_code == 502
        with pytest.raises(APITimeoutError):
            await run_synthesize(
                t, f"[[stall]] {S1}", conn_options=APIConnectOptions(max_retry=0, timeout=0.3)
            )
        # cut mid-body after audio: never retried (LiveKit's ChunkedStream would, so the plugin says so)
        opts = APIConnectOptions(max_retry=3, retry_interval=0.0, timeout=5.0)
        with pytest.raises(APIError) as info:
            await run_synthesize(t, f"{S1} [[drop:5]]", conn_options=opts)
        assert info.value.retryable is False
    finally:
        await t.aclose()
    assert [e.recoverable for e in ev.errors] == [False, False, False]
    assert ev.metrics == []


async def test_synthesize_aclose_mid_body_stops_the_request(emu: Emulator) -> None:
    """Closing a ChunkedStream while its body is being read (the user interrupts a ``say()``) ends it at
    once and frees the HTTP request, even when the cancel lands as a chunk has just been read (Python 3.11's
    ``asyncio.wait_for`` then returns the chunk and loses the cancellation: the read went on to the timeout)."""
    t = make_tts(emu)
    ev = Events(t)
    try:
        for _ in range(3):
            s = t.synthesize(
                f"{S1} That part [[stall:3]] never ends.",
                conn_options=APIConnectOptions(max_retry=0, timeout=60.0),  # far beyond BOUND
            )
            await asyncio.wait_for(s.__anext__(), BOUND)
            await asyncio.wait_for(s.aclose(), BOUND)
            await wait_until(lambda: emu.active_contexts == 0)
    finally:
        await t.aclose()
    assert ev.errors == []
    assert [m.cancelled for m in ev.metrics] == [True] * 3  # LiveKit's ChunkedStream reports a cancelled one


# --- the key never leaks -----------------------------------------------------------------------------------------


def _texts(exc: BaseException) -> str:
    return "\n".join([str(exc), repr(exc), "".join(traceback.format_exception(exc))])


async def test_the_key_never_reaches_logs_or_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    good = "sk_996_good_Zq8vXk2mP4"
    wrong = "sk_996_wrong_Hn3sLw9rT1"
    seen: list[str] = []
    async with Emulator(EmulatorConfig(api_keys={good}, default_voice=TONE_VOICE_ID)) as emu:
        fast = APIConnectOptions(max_retry=0, timeout=2.0)
        cases: list[tuple[str, str, str]] = [
            (wrong, emu.base_url, S1),  # handshake refused (401)
            (good, "http://127.0.0.1:9", S1),  # nothing listening: the socket error quotes the URL
            (good, emu.base_url, f"{S1} [[drop:3]]"),  # dropped mid-stream
            (good, emu.base_url, f"{S1} [[error:voice_not_found]]"),  # catalog error
        ]
        for key, base_url, text in cases:
            t = _tts(key, base_url)
            ev = Events(t)
            try:
                seen.append(repr(t))
                for run in (
                    lambda t=t, text=text: run_stream(t, text, conn_options=fast),
                    lambda t=t, text=text: run_synthesize(t, text, conn_options=fast),
                ):
                    with pytest.raises(APIError) as info:
                        await run()
                    seen.append(_texts(info.value))
                seen += [_texts(e.error) for e in ev.errors]
            finally:
                await t.aclose()
    seen.append(caplog.text)
    seen += [str(r.__dict__) for r in caplog.records]
    blob = "\n".join(seen)
    # the errors did quote the URL (redacted) and the server's refusal
    assert "tts/websocket?api_key=***" in blob
    assert "unauthorized 401" in blob and "voice_not_found" in blob and "connection dropped" in blob
    for key in (good, wrong):
        assert key not in blob
        assert key[len("sk_996_") :] not in blob


def _tts(key: str, base_url: str) -> tts.TTS:
    from livekit.plugins import nineninesix

    return nineninesix.TTS(
        key, base_url=base_url, voice=TONE_VOICE_ID, client_options={"connect_timeout": 2.0}
    )


@pytest.mark.parametrize(
    ("marker", "timeout"),
    [("[[error:generation_failed:10]]", 5.0), ("[[drop:10]]", 5.0), ("[[stall:10]]", 0.3)],
)
async def test_a_turn_failing_after_audio_still_delivers_every_chunk_received(
    emu: Emulator, marker: str, timeout: float
) -> None:
    # LiveKit's emitter holds back part of a frame (its progressive frame and a 10 ms tail); a stream that
    # raises would drop it with the emitter. Every chunk the server sent before the failure is delivered.
    t = make_tts(emu)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=timeout)  # (a stall: the plugin's timeout gives up)
        events, err = await stream_until_error(t, f"{S1} {marker}", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIError) and err.retryable is False
    sent = emu.stats.chunks_sent * emu.config.chunk_ms / 1000
    assert emu.stats.chunks_sent >= 10
    got = duration_of(events)
    # (+10 ms: LiveKit ends a segment whose audio its flush timer already sent with a 10 ms silent marker)
    assert sent - 0.002 <= got <= sent + 0.012, (got, sent)


async def test_synthesize_cut_after_audio_still_delivers_every_event_received(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=5.0)
        events, err = await synthesize_until_error(t, f"{S1} [[drop:10]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APIError) and err.retryable is False
    sent = 10 * emu.config.chunk_ms / 1000  # [[drop:10]]: the body is cut after its 10th event
    got = duration_of(events)
    assert sent - 0.002 <= got <= sent + 0.012, (got, sent)


async def test_synthesize_given_up_by_its_own_timeout_still_delivers_every_event_received(
    emu: Emulator,
) -> None:
    # The server stalls mid-body: the plugin's timeout gives the synthesis up. The resampler (22050 -> 24000
    # Hz) still holds its filter's tail of the audio received (~18 ms): it is delivered before the error.
    t = make_tts(emu)
    try:
        opts = APIConnectOptions(max_retry=0, timeout=0.3)
        events, err = await synthesize_until_error(t, f"{S1} [[stall:10]]", opts)
    finally:
        await t.aclose()
    assert isinstance(err, APITimeoutError) and err.retryable is False
    sent = 10 * emu.config.chunk_ms / 1000  # [[stall:10]]: the body stalls after its 10th event
    got = duration_of(events)
    assert sent - 0.002 <= got <= sent + 0.012, (got, sent)
