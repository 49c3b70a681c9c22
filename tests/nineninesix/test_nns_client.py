"""The Nineninesix WebSocket client and TurnProvider against the emulator over loopback."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from support import wait_until
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault, tone_frequency
from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider, OutputFormat

S1, S2, S3 = "Hello there.", "How can I help you today?", "Let me check that for you."


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as e:
        yield e


def make_provider(emu: Emulator, **kw: object) -> NineninesixTurnProvider:
    opts = kw.pop("options", None) or NineninesixOptions(voice=TONE_VOICE_ID)
    return NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts, **kw)  # type: ignore[arg-type]


async def collect(turn: object, timeout: float = 10.0) -> bytes:
    async def run() -> bytes:
        out = bytearray()
        async for pcm in turn:  # type: ignore[attr-defined]
            assert pcm, "empty chunk yielded"
            assert len(pcm) % 2 == 0
            out += pcm
        return bytes(out)

    return await asyncio.wait_for(run(), timeout)


async def speak(provider: NineninesixTurnProvider, *sentences: str, rate: int = 24000) -> bytes:
    turn = await provider.open_turn(sample_rate=rate)
    for s in sentences:
        await turn.send(s + " ")
    await turn.end()
    return await collect(turn)


def seconds(pcm: bytes, rate: int) -> float:
    return len(pcm) / 2 / rate


def segment(pcm: bytes, rate: int, start_s: float, dur_s: float) -> bytes:
    a = int(start_s * rate) * 2
    return pcm[a : a + int(dur_s * rate) * 2]


def tone_len(text: str) -> float:
    """Duration the emulator's tone voice gives a transcript (approximately: ~60 ms per character)."""
    return max(0.1, 0.06 * len(text.strip()))


# --- audio -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rate", [8000, 16000, 22050, 24000, 48000])
@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_mulaw", "pcm_alaw"])
async def test_turn_audio_is_decoded_and_resampled(emu: Emulator, rate: int, encoding: str) -> None:
    provider = make_provider(emu, options=NineninesixOptions(voice=TONE_VOICE_ID, encoding=encoding))
    try:
        pcm = await speak(provider, S2, rate=rate)
    finally:
        await provider.aclose()
    assert seconds(pcm, rate) == pytest.approx(tone_len(S2), rel=0.1)
    mid = segment(pcm, rate, 0.2, 0.5)
    assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(S2), rel=0.01)
    # The server was asked for a rate it has: the caller's when the API has it, else the native 22050.
    fmt = next(m for _, m in emu.stats.messages if "output_format" in m)["output_format"]
    assert fmt == {"container": "raw", "encoding": encoding, "sample_rate": rate if rate <= 22050 else 22050}


async def test_sentences_stream_into_one_context_in_order(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        pcm = await speak(provider, S1, S2, S3)
    finally:
        await provider.aclose()
    rate = 24000
    starts = [0.0, tone_len(S1), tone_len(S1) + tone_len(S2)]
    for s, t in zip((S1, S2, S3), starts, strict=True):
        got = dominant_frequency(segment(pcm, rate, t + 0.05, min(0.3, tone_len(s) - 0.1)), rate)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    ctx_ids = {m.get("context_id") for _, m in emu.stats.messages}
    assert len(ctx_ids) == 1
    sent = [m for _, m in emu.stats.messages]
    assert [m["continue"] for m in sent] == [True, True, True, False]
    assert sent[-1]["transcript"] == ""


async def test_many_turns_share_one_pooled_connection(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        a, b = await asyncio.gather(speak(provider, S1), speak(provider, S2))
        c = await speak(provider, S3)
        turn = await provider.open_turn(sample_rate=24000)
        assert turn.connection_reused  # pooled: no handshake for this turn
        await turn.cancel()
        assert provider.dialer.opened == 1
    finally:
        await provider.aclose()
    for pcm, s in ((a, S1), (b, S2), (c, S3)):
        assert dominant_frequency(segment(pcm, 24000, 0.05, 0.4), 24000) == pytest.approx(
            tone_frequency(s), rel=0.01
        )
    assert emu.stats.ws_connections == 1


async def test_first_turn_pays_the_handshake_prewarm_takes_it_off(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        first = await provider.open_turn(sample_rate=16000)
        assert not first.connection_reused
        await first.cancel()
        await provider.prewarm(sample_rate=24000)
        warm = await provider.open_turn(sample_rate=24000)
        assert warm.connection_reused
        await warm.cancel()
    finally:
        await provider.aclose()
    assert emu.stats.ws_connections == 2


async def test_empty_text_is_not_sent(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("   ")
        await turn.send(S1)
        await turn.end()
        await collect(turn)
    finally:
        await provider.aclose()
    assert [m["transcript"] for _, m in emu.stats.messages] == [S1, ""]


# --- cancel ------------------------------------------------------------------------------------------------


async def test_cancel_stops_audio_and_keeps_the_socket(emu: Emulator) -> None:
    emu.config.realtime_factor = 4.0  # paced, so the turn is mid-audio when cancelled
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=24000)
        await turn.send(S2 + " " + S3)
        await turn.end()
        got = bytearray()
        it = turn.__aiter__()
        got += await asyncio.wait_for(it.__anext__(), 5)
        await asyncio.wait_for(turn.cancel(), 5)
        after = [c async for c in it]
        assert after == []
        assert turn.done
        # the cancel went out on the same socket, and the connection consumes the server's acknowledgement
        # in the background (cancel() does not wait for it by default: the next turn pays no round trip)
        await emu.wait_until(lambda: any(m.get("cancel") for _, m in emu.stats.messages), 5)
        conn = provider.dialer.connection(NineninesixOptions().output_format(24000))
        assert conn is not None
        await wait_until(lambda: turn is not None and turn.id not in conn.sinks)
        # the next turn runs on the same connection, and its audio is its own
        emu.config.realtime_factor = 0.0
        pcm = await speak(provider, S1)
        assert dominant_frequency(segment(pcm, 24000, 0.05, 0.4), 24000) == pytest.approx(
            tone_frequency(S1), rel=0.01
        )
        assert emu.stats.ws_connections == 1
    finally:
        await provider.aclose()


async def test_cancel_is_idempotent_and_safe_after_done(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)
        await turn.end()
        await collect(turn)
        await asyncio.wait_for(turn.cancel(), 2)
        await asyncio.wait_for(turn.cancel(), 2)
        assert not any(m.get("cancel") for _, m in emu.stats.messages)  # nothing to cancel: nothing sent
    finally:
        await provider.aclose()


# --- errors ------------------------------------------------------------------------------------------------


async def test_generation_failed_ends_one_turn_and_the_socket_stays(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        bad = await provider.open_turn(sample_rate=16000)
        good = await provider.open_turn(sample_rate=16000)
        await bad.send("[[error:generation_failed]] Doomed.")
        await bad.end()
        await good.send(S1)
        await good.end()
        with pytest.raises(TTSAPIError) as info:
            await collect(bad)
        assert info.value.error_code == "generation_failed"
        assert info.value.status_code == 500 and info.value.retryable and not info.value.closes_connection
        pcm = await collect(good)
        assert dominant_frequency(segment(pcm, 16000, 0.05, 0.4), 16000) == pytest.approx(
            tone_frequency(S1), rel=0.01
        )
        await speak(provider, S2, rate=16000)
        assert emu.stats.ws_connections == 1  # same format, same socket
    finally:
        await provider.aclose()


async def test_socket_closing_error_fails_every_context_then_reconnects(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        other = await provider.open_turn(sample_rate=16000)
        await other.send(S1)  # open, not ended: waits for more text
        with pytest.raises(TTSAPIError) as info:
            turn = await provider.open_turn(sample_rate=16000, voice="no-such-voice")
            await turn.send(S2)
            await turn.end()
            await collect(turn)
        assert info.value.error_code == "voice_not_found" and info.value.status_code == 404
        assert not info.value.retryable and info.value.closes_connection
        with pytest.raises(TTSAPIError) as other_info:
            await collect(other)
        assert other_info.value.error_code == "voice_not_found"
        pcm = await speak(provider, S3, rate=16000)
        assert pcm
        assert emu.stats.ws_connections == 2
    finally:
        await provider.aclose()


async def test_concurrent_limit_is_retried_on_a_fresh_context(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=1))
    provider = make_provider(emu, retry_backoff=0.01)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        first_id = turn.id
        await turn.send(S1)
        await turn.send(S2)
        await turn.end()
        pcm = await collect(turn)
    finally:
        await provider.aclose()
    assert turn.retries == 1 and turn.id != first_id
    assert dominant_frequency(segment(pcm, 16000, 0.05, 0.4), 16000) == pytest.approx(
        tone_frequency(S1), rel=0.01
    )
    assert seconds(pcm, 16000) == pytest.approx(tone_len(S1) + tone_len(S2), rel=0.1)
    assert emu.stats.ws_connections == 1


async def test_concurrent_limit_gives_up_after_the_retry_budget(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=0))
    provider = make_provider(emu, retry_backoff=0.01, concurrent_limit_retries=2)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)
        await turn.end()
        with pytest.raises(TTSAPIError) as info:
            await collect(turn)
    finally:
        await provider.aclose()
    assert info.value.error_code == "concurrent_limit" and info.value.status_code == 429
    assert turn.retries == 2


async def test_dropped_socket_fails_the_turn_at_once_and_the_next_reconnects(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("[[drop:2]] " + S2)
        await turn.end()
        with pytest.raises(TTSConnectionError) as info:
            await collect(turn, timeout=5)
        assert info.value.retryable
        pcm = await speak(provider, S1, rate=16000)
        assert pcm and emu.stats.ws_connections == 2
    finally:
        await provider.aclose()


async def test_drop_from_outside_fails_open_turns(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)  # not ended: the turn waits for more text
        await emu.drop_connections()
        with pytest.raises(TTSConnectionError):
            await collect(turn, timeout=5)
    finally:
        await provider.aclose()


async def test_stalled_server_times_out(emu: Emulator) -> None:
    provider = make_provider(emu, receive_timeout=0.3)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("[[stall]] " + S1)
        await turn.end()
        with pytest.raises(TTSTimeoutError):
            await collect(turn, timeout=5)
    finally:
        await provider.aclose()


async def test_bad_key_is_a_typed_error_without_the_key(emu: Emulator) -> None:
    key = "sk_not_valid_secret_value_123"
    emu.config.api_keys = {emu.api_key}
    provider = NineninesixTurnProvider(key, base_url=emu.base_url)
    try:
        with pytest.raises(TTSAPIError) as info:
            await provider.open_turn(sample_rate=16000)
    finally:
        await provider.aclose()
    assert info.value.status_code == 401 and not info.value.retryable
    assert key not in str(info.value) and key not in repr(info.value)


async def test_key_never_logged(emu: Emulator, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    provider = make_provider(emu)
    try:
        await speak(provider, S1)
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("[[drop:1]] " + S2)
        await turn.end()
        with pytest.raises(TTSConnectionError) as info:
            await collect(turn)
    finally:
        await provider.aclose()
    assert emu.api_key not in caplog.text
    assert emu.api_key not in str(info.value)
    assert caplog.records, "debug logging was captured"


# --- idle --------------------------------------------------------------------------------------------------


async def test_idle_connection_is_replaced_before_a_turn(emu: Emulator) -> None:
    provider = make_provider(emu, max_idle=0.05)
    try:
        await speak(provider, S1)
        conn = provider.dialer.connection(NineninesixOptions().output_format(24000))
        assert conn is not None
        await wait_until(lambda: conn.idle_for() > 0.05)
        await speak(provider, S2)
    finally:
        await provider.aclose()
    assert emu.stats.ws_connections == 2


async def test_server_idle_close_does_not_fail_the_next_turn(emu: Emulator) -> None:
    emu.config.idle_timeout_s = 0.2
    provider = make_provider(emu)
    try:
        await speak(provider, S1)
        await wait_until(lambda: emu.stats.ws_open == 0)
        await wait_until(lambda: provider.dialer.connection(OutputFormat(sample_rate=22050)) is None)
        pcm = await speak(provider, S2)
        assert pcm
    finally:
        await provider.aclose()
    assert emu.stats.ws_connections == 2


# --- HTTP --------------------------------------------------------------------------------------------------


async def test_sse_synthesize_streams_resampled_audio(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        chunks = [c async for c in provider.synthesize(S2, sample_rate=48000)]
    finally:
        await provider.aclose()
    pcm = b"".join(chunks)
    assert len(chunks) > 1  # streamed, not one body
    assert dominant_frequency(segment(pcm, 48000, 0.2, 0.5), 48000) == pytest.approx(
        tone_frequency(S2), rel=0.01
    )


async def test_http_bytes_and_voices(emu: Emulator) -> None:
    from ttsbridge.audio.wav import read_wav

    provider = make_provider(emu)
    http = provider.http
    try:
        wav = await http.tts_bytes(S1, OutputFormat(container="wav", sample_rate=16000), voice=TONE_VOICE_ID)
        pcm, rate = read_wav(wav)
        assert rate == 16000 and dominant_frequency(pcm, rate) == pytest.approx(tone_frequency(S1), rel=0.01)
        voices = await http.list_voices(limit=1)  # forces pagination
        ids = {v["id"] for v in voices}
        assert TONE_VOICE_ID in ids
        assert (await http.get_voice(TONE_VOICE_ID))["id"] == TONE_VOICE_ID
        cloned = await http.clone_voice("My clone", b"RIFF....WAVE")
        assert cloned["id"] in {v["id"] for v in await http.list_voices()}
        with pytest.raises(TTSAPIError) as info:
            await http.get_voice("no-such-voice")
        assert info.value.status_code == 404
    finally:
        await provider.aclose()


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [("insufficient_credits", 402, False), ("rate_limited", 429, True)],
)
async def test_http_errors_are_typed(emu: Emulator, code: str, status: int, retryable: bool) -> None:
    emu.add_fault(Fault(trigger="boom", action="error", error_code=code, times=0))
    provider = make_provider(emu)
    provider.http.max_retries = 1
    provider.http.max_retry_after = 0.01
    try:
        with pytest.raises(TTSAPIError) as info:
            async for _ in provider.synthesize("boom", sample_rate=16000):
                pass
    finally:
        await provider.aclose()
    assert info.value.status_code == status and info.value.retryable is retryable
    if status == 429:
        assert info.value.retry_after is not None


async def test_connection_refused_error_text_has_no_key(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    caplog.set_level(logging.DEBUG)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = "sk_996_refused_secret_0123456789"
    provider = NineninesixTurnProvider(key, base_url=f"http://127.0.0.1:{port}", connect_timeout=2)
    try:
        with pytest.raises(TTSConnectionError) as info:
            await provider.open_turn(sample_rate=16000)
    finally:
        await provider.aclose()
    assert "127.0.0.1" in str(info.value)  # says where it tried
    assert key not in str(info.value) and key not in repr(info.value)
    assert key not in caplog.text
    assert info.value.retryable


async def test_http_needs_a_voice_and_says_so_before_sending(emu: Emulator) -> None:
    provider = NineninesixTurnProvider(emu.api_key, base_url=emu.base_url)  # no voice
    try:

        async def drain_sse() -> None:
            async for _ in provider.http.tts_sse(S1):
                pass

        async def synthesize() -> bytes:
            return b"".join([c async for c in provider.synthesize(S1, sample_rate=16000)])

        with pytest.raises(TTSInvalidOptionError, match="voice"):
            await asyncio.wait_for(drain_sse(), 10.0)
        # the provider's one-shot synthesis speaks the default voice over the WebSocket instead
        pcm = await asyncio.wait_for(synthesize(), 10.0)
    finally:
        await provider.aclose()
    assert emu.stats.http_requests == 0
    assert len(pcm) / 2 / 16000 == pytest.approx(0.06 * len(S1), abs=0.03)


async def test_cancel_can_wait_for_the_acknowledgement(emu: Emulator) -> None:
    emu.config.realtime_factor = 4.0
    provider = make_provider(emu, wait_for_cancel_ack=True)
    try:
        turn = await provider.open_turn(sample_rate=24000)
        await turn.send(S2 + " " + S3)
        await turn.end()
        it = turn.__aiter__()
        await asyncio.wait_for(it.__anext__(), 5)
        await asyncio.wait_for(turn.cancel(), 5)
        # returned only once the server confirmed: the context is already gone from the connection
        ctx = turn
        assert ctx is not None and ctx.settled
        conn = provider.dialer.connection(NineninesixOptions().output_format(24000))
        assert conn is not None and ctx.id not in conn.sinks
        assert [c async for c in it] == []
    finally:
        await provider.aclose()
