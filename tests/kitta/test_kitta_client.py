"""KittaTurnProvider against the emulator over loopback."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kitta_support import session_ready

from support import wait_until as poll
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSTimeoutError
from ttsbridge.kitta import KittaLimitError, KittaLimits, KittaTurnProvider
from ttsbridge.kitta.catalog import retry_request_id
from ttsbridge.kitta.facts import KittaRequest

WAIT = 10.0
SENTENCES = ["Hello there. ", "How are you today? ", "This is the third sentence. "]

MakeProvider = Callable[..., KittaTurnProvider]


async def collect(turn: EngineTurn) -> bytes:
    async def _all() -> bytes:
        return b"".join([chunk async for chunk in turn])

    return await asyncio.wait_for(_all(), WAIT)


async def speak(
    provider: KittaTurnProvider, sentences: list[str], sample_rate: int = 24000, **overrides: Any
) -> tuple[EngineTurn, bytes]:
    turn = await provider.open_turn(sample_rate=sample_rate, **overrides)
    for s in sentences:
        await turn.send(s)
    await turn.end()
    return turn, await collect(turn)


async def raw_turn(provider: KittaTurnProvider, request_id: str | None = None) -> EngineTurn:
    """A turn on a fresh session whose sends are not flushed (the protocol's default request), at the
    server's rate: the engine's turn over the provider's dialer, as the provider opens one."""
    turn = EngineTurn(
        provider.dialer, KittaRequest(), turn_id=request_id or str(uuid.uuid4()), sample_rate=24000
    )
    return await turn.open()


def check_tones(pcm: bytes, sentences: list[str], rate: int) -> None:
    """The audio is the sentences' tones, in order, each as long as the tone voice makes it."""
    lengths = [round(tone_duration(s) * rate) for s in sentences]
    samples = len(pcm) // 2
    assert abs(samples - sum(lengths)) <= max(8, sum(lengths) // 500), (samples, sum(lengths))
    start = 0
    for sentence, n in zip(sentences, lengths, strict=True):
        middle = pcm[2 * (start + n // 5) : 2 * (start + n - n // 5)]
        freq = dominant_frequency(middle, rate)
        assert freq == pytest.approx(tone_frequency(sentence), rel=0.01), sentence
        start += n


# -------------------------------------------------------------------------------------------------- audio


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
async def test_turn_audio_is_the_sentences_in_order_at_the_requested_rate(
    make_provider: MakeProvider, rate: int
) -> None:
    provider = make_provider()
    turn, pcm = await speak(provider, SENTENCES, rate)
    assert turn.sample_rate == rate and turn.done and turn.audio_started
    assert turn.characters_sent == sum(map(len, SENTENCES))
    check_tones(pcm, [s.strip() for s in SENTENCES], rate)


async def test_synthesize_native_and_resampled(make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False)
    text = "One shot synthesis."
    native = b"".join([c async for c in provider.synthesize(text, sample_rate=24000)])
    check_tones(native, [text], 24000)
    at16 = b"".join([c async for c in provider.synthesize(text, sample_rate=16000)])
    check_tones(at16, [text], 16000)


async def test_synthesize_failing_after_audio_yields_every_sample_received_first(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    # At 16 kHz (the server's 24 kHz resampled) the resampler holds the filter's tail of what was received
    # when the server's error comes: it is yielded before the error is raised, not dropped.
    provider = make_provider(max_retries=0, standby=False)
    got: list[bytes] = []

    async def run() -> None:
        text = "One shot synthesis. [[kitta:error_after_audio]]"
        async for c in provider.synthesize(text, sample_rate=16000):
            got.append(c)

    with pytest.raises(TTSAPIError) as info:
        await asyncio.wait_for(run(), WAIT)
    assert info.value.error_code == "internal_error"
    sent_s = kemu.stats.kitta_audio_frames * kemu.config.kitta.chunk_ms / 1000
    assert kemu.stats.kitta_audio_frames >= 1
    got_s = len(b"".join(got)) / 2 / 16000
    assert sent_s - 0.001 <= got_s <= sent_s + 0.001, (got_s, sent_s)


async def test_provider_default_synthesize(make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False)
    pcm = b"".join([c async for c in provider.synthesize("Default one shot.", sample_rate=16000)])
    check_tones(pcm, ["Default one shot."], 16000)


async def test_frame_auth_end_to_end(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(auth="frame", standby=False)
    _, pcm = await speak(provider, ["Authenticated in band. "])
    check_tones(pcm, ["Authenticated in band."], 24000)
    assert kemu.stats.kitta_auth_modes == ["frame"]


async def test_long_text_is_split_and_flushed_early_within_server_limits(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.max_text_chars = 100
    kemu.config.kitta.max_segment_chars = 300
    provider = make_provider(limits=KittaLimits(max_text_chars=100, max_segment_chars=300), standby=False)
    sentences = [f"Sentence {i:02d} is right here. " for i in range(30)]  # 30 x 27 chars
    gen = await raw_turn(provider)
    await gen.send("".join(sentences))
    await gen.end()
    pcm = b"".join([c async for c in gen])
    assert gen.outcome == "done" and kemu.stats.kitta_errors == []
    texts = kemu.stats.kitta_segment_texts
    # text events of 3 sentences (81 chars), segments of 3 text events (243): the 4th would pass 300
    assert [len(t) for t in texts] == [242, 242, 242, 80]  # (billed text is trimmed)
    assert " ".join(texts) == "".join(sentences).strip()
    check_tones(pcm, texts, 24000)  # one tone per flushed segment


async def test_session_unit_limit_raises_before_sending(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(limits=KittaLimits(max_session_units=30), standby=False)
    gen = await provider.open_turn(sample_rate=24000)
    await gen.send("Twenty characters.. ")
    with pytest.raises(KittaLimitError):
        await gen.send("Another twenty chars")
    await gen.end()
    pcm = b"".join([c async for c in gen])
    assert kemu.stats.kitta_segment_texts == ["Twenty characters.."]
    check_tones(pcm, ["Twenty characters.."], 24000)


# ------------------------------------------------------------------------------------------------- cancel


async def test_cancel_mid_audio_then_next_turn_uses_the_standby(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.realtime_factor = 1.0  # audio keeps flowing while we cancel
    provider = make_provider()
    await provider.prewarm()
    turn = await provider.open_turn(sample_rate=16000)
    assert turn.connection_reused
    await turn.send("A fairly long sentence so that the audio is still streaming when we cancel. ")
    await turn.end()
    got: list[bytes] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for chunk in turn:
            got.append(chunk)
            first.set()

    consumer = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), WAIT)
    await turn.cancel()
    count = len(got)
    await asyncio.wait_for(consumer, WAIT)
    assert len(got) == count, "audio was yielded after cancel() returned"
    assert turn.done and turn.audio_started
    await turn.cancel()  # idempotent
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes >= 1, timeout=WAIT)
    assert kemu.stats.kitta_finished == 0
    kemu.config.kitta.realtime_factor = 0.0
    turn2, pcm = await speak(provider, ["After the barge in. "], 16000)
    assert turn2.connection_reused and turn2.id != turn.id
    check_tones(pcm, ["After the barge in."], 16000)


async def test_cancel_before_any_audio_bills_nothing(kemu: Emulator, make_provider: MakeProvider) -> None:
    kemu.config.kitta.first_chunk_latency_s = 5.0
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Never heard. ")
    await kemu.wait_until(lambda: kemu.stats.kitta_segments == 1, timeout=WAIT)
    await turn.cancel()
    assert await collect(turn) == b""
    await kemu.wait_until(lambda: kemu.stats.kitta_units_refunded == len("Never heard."), timeout=WAIT)
    assert kemu.stats.kitta_units_committed == 0


# -------------------------------------------------------------------------------------------------- retries


async def test_retry_on_retryable_error_before_audio(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False)
    text = "Hello there. [[kitta:error=internal_error:retryable:times=1]]"
    turn, pcm = await speak(provider, [text])
    check_tones(pcm, ["Hello there."], 24000)
    base = kemu.stats.kitta_request_ids[0]
    assert kemu.stats.kitta_request_ids == [base, retry_request_id(base, 1)]
    assert turn.id == retry_request_id(base, 1)
    assert turn.retries == 1 and kemu.stats.kitta_errors == ["internal_error"]
    assert kemu.stats.kitta_units_refunded == len("Hello there.")


@pytest.mark.parametrize("close_code", [1012, 1013])
async def test_retry_on_close_1012_1013(kemu: Emulator, make_provider: MakeProvider, close_code: int) -> None:
    provider = make_provider(standby=False)
    turn, pcm = await speak(provider, [f"Come again. [[kitta:close={close_code}:times=1]]"])
    check_tones(pcm, ["Come again."], 24000)
    assert kemu.stats.kitta_server_closes[0] == close_code
    assert kemu.stats.kitta_sessions == 2 and turn.retries == 1


async def test_retry_when_the_session_closes_before_ready(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.session_faults = ["close=1013:at=start"]
    provider = make_provider(standby=False)
    _, pcm = await speak(provider, ["Queued before ready. "])
    check_tones(pcm, ["Queued before ready."], 24000)
    assert kemu.stats.kitta_sessions == 2


async def test_resume_replays_only_segments_never_delivered(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("First one. ")
    chunks: list[bytes] = []
    it = turn.__aiter__()
    # let the first segment complete before the second one fails
    await kemu.wait_until(lambda: kemu.stats.kitta_units_committed == len("First one."), timeout=WAIT)
    await turn.send("Second one. [[kitta:error=overloaded:retryable:times=1]]")
    await turn.end()
    async for chunk in it:
        chunks.append(chunk)
    check_tones(b"".join(chunks), ["First one.", "Second one."], 24000)
    assert kemu.stats.kitta_segment_texts == ["First one.", "Second one.", "Second one."]
    assert turn.retries == 1


async def test_no_retry_after_audio_was_delivered(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Partly heard. [[kitta:error_after_audio]]")
    await turn.end()
    got: list[bytes] = []
    with pytest.raises(TTSAPIError) as exc:
        async for chunk in turn:
            got.append(chunk)
    assert exc.value.error_code == "internal_error" and exc.value.retryable  # retryable, yet not retried
    assert got and turn.audio_started and turn.done
    assert kemu.stats.kitta_sessions == 1 and kemu.stats.kitta_segment_texts == ["Partly heard."]


async def test_retries_are_bounded(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False, max_retries=2)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Always failing. [[kitta:error=internal_error:retryable]]")
    await turn.end()
    with pytest.raises(TTSAPIError) as exc:
        await collect(turn)
    assert exc.value.retryable and kemu.stats.kitta_sessions == 3
    base = kemu.stats.kitta_request_ids[0]
    assert kemu.stats.kitta_request_ids == [base, f"{base}.r1", f"{base}.r2"]


async def test_fatal_error_raises_typed_error_without_retry(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000, voice_id="no-such-voice")
    await turn.send("Who am I? ")
    await turn.end()
    with pytest.raises(TTSAPIError) as exc:
        await collect(turn)
    err = exc.value
    assert (err.provider, err.error_code, err.retryable) == ("kitta", "voice_not_found", False)
    assert err.request_id == turn.id
    assert kemu.stats.kitta_connections == 1


async def test_handshake_401_is_typed_and_keyless(kemu: Emulator, make_provider: MakeProvider) -> None:
    kemu.config.kitta.api_keys = {kemu.config.kitta.a_valid_key()}  # strict keys (default: any non-empty key)
    provider = make_provider(
        api_key="kitta_wrong_key_123" if kemu.config.kitta.api_keys else "bad-key-123", standby=False
    )
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Nope. ")
    with pytest.raises(TTSAPIError) as exc:
        await collect(turn)
    assert (exc.value.status_code, exc.value.error_code, exc.value.retryable) == (401, "unauthorized", False)
    assert "bad-key-123" not in str(exc.value) and "kitta_wrong_key_123" not in str(exc.value)
    assert kemu.stats.kitta_handshakes == 1


async def test_retryable_handshake_answers_are_retried(kemu: Emulator, make_provider: MakeProvider) -> None:
    kemu.config.kitta.handshake_status = 503
    kemu.config.kitta.retry_after_s = 0
    provider = make_provider(standby=False, max_retries=2)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Busy. ")
    with pytest.raises(TTSAPIError) as exc:
        await collect(turn)
    assert exc.value.status_code == 503 and exc.value.retryable
    assert kemu.stats.kitta_rejected_handshakes == [503, 503, 503]


async def test_server_silence_is_bounded(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False, event_timeout=0.3)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Stuck. [[kitta:stall]]")
    with pytest.raises(TTSTimeoutError):
        await collect(turn)
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes == 1, timeout=WAIT)


async def test_aclose_fails_open_turns(make_provider: MakeProvider, kemu: Emulator) -> None:
    kemu.config.kitta.first_chunk_latency_s = 5.0
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Unfinished. ")
    await kemu.wait_until(lambda: kemu.stats.kitta_segments == 1, timeout=WAIT)
    await provider.aclose()
    with pytest.raises(TTSConnectionError):
        await collect(turn)
    with pytest.raises(TTSConnectionError):
        await provider.open_turn(sample_rate=24000)


# -------------------------------------------------------------------------------------------------- standby


async def test_standby_is_used_and_replaced(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider()
    await provider.prewarm()
    first = provider.dialer.standby
    assert first is not None and first.quiet and not first.protocol.is_ready
    turn1, pcm1 = await speak(provider, ["Turn one. "])
    assert turn1.connection_reused and turn1.link is first
    await provider.prewarm()  # the replacement connects
    second = provider.dialer.standby
    assert second is not None and second is not first and second.quiet
    turn2, pcm2 = await speak(provider, ["Turn two. "])
    assert turn2.connection_reused and turn2.link is second
    check_tones(pcm1, ["Turn one."], 24000)
    check_tones(pcm2, ["Turn two."], 24000)
    assert provider.dialer.hits == 2 and provider.dialer.misses == 0
    await provider.prewarm()
    assert provider.dialer.created == 3 and kemu.stats.kitta_connections == 3
    assert kemu.stats.kitta_request_ids == [turn1.id, turn2.id]  # one session per turn, none while idle


async def test_standby_is_retired_by_age(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby_max_age=0.3)
    await provider.prewarm()
    old = provider.dialer.standby
    assert old is not None
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes >= 1, timeout=WAIT)  # retired, closed
    await poll(lambda: old.finished, WAIT)
    assert provider.dialer.retired >= 1
    await provider.prewarm()
    turn, pcm = await speak(provider, ["Fresh standby. "])
    assert turn.connection_reused and turn.link is not old
    check_tones(pcm, ["Fresh standby."], 24000)
    assert kemu.stats.kitta_segment_texts == ["Fresh standby."]  # retired connections were never billed
    assert kemu.stats.kitta_request_ids == [turn.id]


async def test_overrides_use_the_standby_connection(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider()
    await provider.prewarm()
    standby = provider.dialer.standby
    turn, pcm = await speak(provider, ["In English. "], language="en")
    # start carries the turn's options, so the warm connection serves any voice or language
    assert turn.connection_reused and turn.link is standby
    assert standby is not None and standby.protocol.request.language == "en"
    check_tones(pcm, ["In English."], 24000)


async def test_update_options_keeps_the_warm_connection(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider()
    await provider.prewarm()
    standby = provider.dialer.standby
    provider.update_options(language="en")
    assert provider.options.language == "en"
    turn, _ = await speak(provider, ["Now in English. "])
    assert turn.link is standby and turn.link.protocol.request.language == "en"
    await provider.prewarm()
    assert kemu.stats.kitta_connections == 2 and kemu.stats.kitta_sessions == 1  # the used one + replacement


async def test_standby_recovers_after_server_drops_it(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider()
    await provider.prewarm()
    dead = provider.dialer.standby
    assert await kemu.drop_connections() == 1
    assert dead is not None
    await poll(lambda: dead.finished, WAIT)
    turn, pcm = await speak(provider, ["Still fine. "])
    assert turn.id != dead.protocol.request_id
    check_tones(pcm, ["Still fine."], 24000)


# ----------------------------------------------------------------------------------------------- secrets


async def test_no_key_in_any_url_or_log(
    kemu: Emulator, make_provider: MakeProvider, kitta_key: str, caplog: pytest.LogCaptureFixture
) -> None:
    kemu.config.kitta.api_keys = {kitta_key}  # strict keys (default: any non-empty key)
    caplog.set_level(logging.DEBUG)
    header = make_provider()
    await header.prewarm()
    await speak(header, ["Header auth. "])
    frame = make_provider(auth="frame", standby=False)
    await speak(frame, ["Frame auth. "])
    wrong = "kitta_this_key_is_wrong" if kemu.config.kitta.api_keys else "wrong_key_value_42"
    bad = make_provider(api_key=wrong, standby=False)
    turn = await bad.open_turn(sample_rate=24000)
    await turn.send("x")
    with pytest.raises(TTSAPIError) as exc:
        await collect(turn)
    assert kemu.stats.kitta_handshake_urls and all(
        u == "/v2/tts/live" for u in kemu.stats.kitta_handshake_urls
    )
    assert "> GET /v2/tts/live" in caplog.text, "the websockets handshake log was not captured"
    assert "Bearer ***" in caplog.text  # the Authorization header line, masked
    for secret in (kitta_key, wrong):
        assert secret not in caplog.text
        assert secret not in str(exc.value)
        for obj in (header, frame, bad, header.dialer.pool, turn, turn.link, turn.protocol):
            assert secret not in repr(obj)


async def test_unflushed_text_is_never_billed_on_cancel(kemu: Emulator, make_provider: MakeProvider) -> None:
    gen = await raw_turn(make_provider(standby=False))
    await gen.send("Buffered but never flushed. ")
    await session_ready(gen.link)
    await gen.cancel()
    assert [c async for c in gen] == []
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes == 1, timeout=WAIT)
    assert kemu.stats.kitta_segments == 0 and kemu.stats.kitta_units_committed == 0


async def test_caller_request_id_is_the_idempotency_key(kemu: Emulator, make_provider: MakeProvider) -> None:
    provider = make_provider(standby=False)
    first = await raw_turn(provider, "order-42")
    await first.send("First time. ")
    await first.end()
    assert [c async for c in first]
    again = await raw_turn(provider, "order-42")  # the same generation, replayed by mistake
    await again.send("First time. ")
    await again.end()
    with pytest.raises(TTSAPIError) as exc:
        _ = [c async for c in again]
    assert exc.value.error_code == "invalid_state" and not exc.value.retryable
    assert kemu.stats.kitta_request_ids == ["order-42"] and kemu.stats.kitta_segment_texts == ["First time."]
