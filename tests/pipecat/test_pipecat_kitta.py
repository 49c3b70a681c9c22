"""KittaTTSService: the same Pipecat service over the Kitta provider, against the emulator's Kitta endpoint.

Same checks as Nineninesix: turns, rates, barge-in (the session is closed, the next turn starts on the
standby, nothing stale), the transcript, errors with and without delivered audio, and no key anywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger
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
    pipeline,
    run,
    segment,
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
    TTSUpdateSettingsFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.services.tts_service import TextAggregationMode
from pipecat.utils.errors import ErrorCategory

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, tone_frequency
from ttsbridge.emulator.kitta import KittaConfig
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.pipecat import KittaTTSService

NEXT = "Is there anything else?"
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0}


def make_kitta(emu: Emulator, **kwargs: Any) -> KittaTTSService:
    key = kwargs.pop("api_key", emu.config.kitta.a_valid_key())
    settings = kwargs.pop("settings", None) or KittaTTSService.Settings(voice=TONE_VOICE_ID)
    return KittaTTSService(
        key,
        base_url=emu.base_url,
        settings=settings,
        provider_options=kwargs.pop("provider_options", FAST),
        stop_frame_timeout_s=60.0,
        **kwargs,
    )


def llm_turn(*sentences: str) -> list:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 5]) for i in range(0, len(text), 5)],
        LLMFullResponseEndFrame(),
    ]


def contexts(frames: list) -> list[str]:
    return list(dict.fromkeys(f.context_id for f in frames if isinstance(f, TTSAudioRawFrame)))


def assert_tones(pcm: bytes, rate: int, *sentences: str) -> None:
    t = 0.0
    for s in sentences:
        mid = segment(pcm, rate, t + 0.25 * tone_len(s), 0.5 * tone_len(s))
        assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(s), abs=15)
        t += tone_len(s)
    assert len(pcm) / 2 / rate == pytest.approx(t, abs=0.05)


async def test_llm_turn_starts_on_the_standby_session(emu: Emulator) -> None:
    tts = make_kitta(emu)
    down, up = await run(tts, llm_turn(S1, S2, S3), rate=24000)

    assert not errors_of(up)
    assert_tones(audio_of(down), 24000, S1, S2, S3)
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 1
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    assert " ".join(words_of(down)) == f"{S1} {S2} {S3}"
    # the turn took the session warmed up at start: one generation, every sentence a segment of it
    assert tts.provider.dialer.hits == 1  # type: ignore[attr-defined]
    assert [t.strip() for t in emu.stats.kitta_segment_texts] == [S1, S2, S3]
    assert all("token" not in u and "api_key" not in u for u in emu.stats.kitta_handshake_urls)


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
async def test_rates(emu: Emulator, rate: int) -> None:
    tts = make_kitta(emu)
    down, up = await run(tts, [TTSSpeakFrame(S2)], rate=rate)
    assert not errors_of(up)
    assert {f.sample_rate for f in down if isinstance(f, TTSAudioRawFrame)} == {rate}
    assert_tones(audio_of(down), rate, S2)


async def test_token_mode_flushes_clauses_not_tokens(emu: Emulator) -> None:
    tts = make_kitta(emu, text_aggregation_mode=TextAggregationMode.TOKEN)
    down, up = await run(tts, llm_turn(S1, S2), rate=24000)
    assert not errors_of(up)
    segments = emu.stats.kitta_segment_texts
    assert 2 <= len(segments) < len(f"{S1} {S2}") // 5
    assert " ".join(s.strip() for s in segments) == f"{S1} {S2}"
    assert " ".join(words_of(down)) == f"{S1} {S2}"


async def test_barge_in_closes_the_session_and_the_next_turn_is_clean(emu: Emulator) -> None:
    emu.config.kitta.realtime_factor = 2.0
    tts = make_kitta(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2, S3), InterruptWhen(probe.first_audio), *llm_turn(NEXT)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    assert not errors_of(up)
    first, second = contexts(probe.frames)
    cut = next(i for i, f in enumerate(probe.frames) if isinstance(f, InterruptionFrame))
    after = probe.frames[cut + 1 :]
    assert not [f for f in after if isinstance(f, (TTSAudioRawFrame, TTSTextFrame)) and f.context_id == first]
    assert 0 < len(audio_of(probe.frames[:cut], first)) / 2 / 24000 < tone_len(S1)
    assert emu.stats.kitta_client_closes >= 1  # v2 has no cancel: the turn's session was closed
    assert_tones(audio_of(after, second), 24000, NEXT)
    assert tts.provider.dialer.hits >= 1  # type: ignore[attr-defined]


async def test_interrupted_turn_leaves_only_what_was_heard_in_the_context(emu: Emulator) -> None:
    emu.config.kitta.realtime_factor = 2.0
    tts = make_kitta(emu)
    context = LLMContext()
    gate, probe = Gate(), Probe(words=2)
    frames = [*llm_turn(S1, S2, S3), InterruptWhen(probe.words_seen)]
    await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=24000)

    said = [m["content"] for m in context.messages if m["role"] == "assistant"]
    assert len(said) == 1
    words = said[0].split()
    assert words and words == S1.split()[: len(words)] and len(words) < len(S1.split())


async def test_runtime_settings_update_reaches_the_next_session(emu: Emulator) -> None:
    tts = make_kitta(emu)
    update = TTSUpdateSettingsFrame(delta=KittaTTSService.Settings(speed=1.5))
    gate, probe = Gate(), Probe()
    _, up = await run(
        pipeline(gate, tts, probe), [TTSSpeakFrame(S1), WaitFor(probe.stopped), update, TTSSpeakFrame(NEXT)]
    )
    assert not errors_of(up)
    assert tts.provider.options.speed == 1.5  # type: ignore[attr-defined]
    assert len(contexts(probe.frames)) == 2


async def test_error_after_audio_ends_the_turn_only(emu: Emulator) -> None:
    tts = make_kitta(emu)
    gate, probe = Gate(), Probe()
    first_turn = llm_turn(S1, f"{S2} [[kitta:error_after_audio]]", S3)
    frames = [*first_turn, WaitFor(probe.stopped), TTSSpeakFrame(NEXT)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    errors = errors_of(up)
    assert [e.category for e in errors] == [ErrorCategory.SERVER]
    assert tts.is_usable
    first, second = contexts(probe.frames)
    words = [f.text for f in probe.frames if isinstance(f, TTSTextFrame) and f.context_id == first]
    assert not set(S3.split()) & set(words)
    assert_tones(audio_of(probe.frames, second), 24000, NEXT)


async def test_retryable_error_before_audio_is_retried(emu: Emulator) -> None:
    tts = make_kitta(emu)
    down, up = await run(tts, [TTSSpeakFrame(f"{S1} [[kitta:error=internal_error:retryable:times=1]]")])
    assert not errors_of(up)
    assert audio_of(down)


async def test_unknown_voice_is_fatal(emu: Emulator) -> None:
    tts = make_kitta(emu, settings=KittaTTSService.Settings(voice="no-such-voice"))
    down, up = await run(tts, [TTSSpeakFrame(S1), TTSSpeakFrame(NEXT)])
    errors = errors_of(up)
    assert errors and errors[0].category is ErrorCategory.INVALID_REQUEST
    assert not tts.is_usable
    assert not audio_of(down)


def test_invalid_options_raise_before_connecting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KITTA_API_KEY", raising=False)
    with pytest.raises(TTSInvalidOptionError):
        KittaTTSService(settings=KittaTTSService.Settings(voice="v"))
    with pytest.raises(TTSInvalidOptionError) as info:
        KittaTTSService("kitta_k")  # no voice
    assert info.value.field == "voice"
    with pytest.raises(TTSInvalidOptionError) as info:
        KittaTTSService("kitta_k", settings=KittaTTSService.Settings(voice="v", model="qwen-tts", speed=1.2))
    assert info.value.field == "speed"


@pytest.fixture
def captured_logs(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    lines: list[str] = []
    handler = logger.add(lambda message: lines.append(str(message)), level="TRACE")
    caplog.set_level(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.remove(handler)
        lines.extend(r.getMessage() for r in caplog.records)


async def test_bad_key_is_fatal_and_no_key_is_ever_logged(captured_logs: list[str]) -> None:
    good, bad = "kitta_the_good_key_1234", "kitta_wrong_key_do_not_leak"
    config = EmulatorConfig(default_voice=TONE_VOICE_ID, kitta=KittaConfig(api_keys={good}))
    async with Emulator(config) as emu:
        tts = make_kitta(emu, api_key=bad)
        _, up = await run(tts, [TTSSpeakFrame(S1)])
        errors = errors_of(up)
        assert errors and errors[0].category is ErrorCategory.AUTHENTICATION
        assert not tts.is_usable
        ok = make_kitta(emu, api_key=good)
        down, up2 = await run(ok, [TTSSpeakFrame(f"{S1} [[kitta:error_after_audio]]"), TTSSpeakFrame(NEXT)])
        urls = list(emu.stats.kitta_handshake_urls)
    assert audio_of(down)
    texts = [*captured_logs, *urls, *(e.error for e in errors_of(up) + errors_of(up2))]
    assert captured_logs
    assert not [t for t in texts if bad in t or good in t]


@pytest.mark.parametrize("code", [1012, 1013])
async def test_close_1012_1013_before_audio_is_retried(emu: Emulator, code: int) -> None:
    tts = make_kitta(emu)
    down, up = await run(tts, [TTSSpeakFrame(f"{S1} [[kitta:close={code}:times=1]]")])
    assert not errors_of(up)
    assert_tones(audio_of(down), tts.sample_rate, S1)
    assert code in emu.stats.kitta_server_closes


async def test_text_over_the_per_event_limit_is_split_and_spoken_whole(emu: Emulator) -> None:
    # One "sentence" with no boundary the aggregator could cut at: 2,300 characters, over Kitta's 2,000 per
    # text event. The provider splits it at word boundaries; the server (which enforces the limit) accepts it.
    long_text = " ".join(["word"] * 460)
    tts = make_kitta(emu)
    down, up = await run(tts, [TTSSpeakFrame(long_text)], rate=8000)
    assert not errors_of(up)
    assert "text_too_long" not in emu.stats.kitta_errors
    pcm = audio_of(down)
    assert len(pcm) / 2 / 8000 == pytest.approx(tone_len(long_text), rel=0.02)
