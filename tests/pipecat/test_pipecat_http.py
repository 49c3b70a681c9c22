"""NineninesixHttpTTSService: one POST /tts/sse per sentence, frames pushed as the events arrive."""

from __future__ import annotations

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
    pipeline,
    run,
    segment,
    tone_len,
    words_of,
)
from pipecat.frames.frames import (
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
from pipecat.utils.errors import ErrorCategory

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault, tone_frequency
from ttsbridge.pipecat import NineninesixHttpTTSService

NEXT = "Is there anything else?"


def make_http_tts(emu: Emulator, **kwargs: object) -> NineninesixHttpTTSService:
    api_key = kwargs.pop("api_key", emu.api_key)
    return NineninesixHttpTTSService(
        api_key,  # type: ignore[arg-type]
        base_url=emu.base_url,
        settings=NineninesixHttpTTSService.Settings(voice=TONE_VOICE_ID),
        stop_frame_timeout_s=60.0,
        **kwargs,  # type: ignore[arg-type]
    )


def llm_turn(*sentences: str) -> list:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 7]) for i in range(0, len(text), 7)],
        LLMFullResponseEndFrame(),
    ]


@pytest.mark.parametrize(
    ("rate", "encoding"), [(24000, "pcm_s16le"), (8000, "pcm_mulaw"), (48000, "pcm_alaw")]
)
async def test_llm_turn_over_sse(emu: Emulator, rate: int, encoding: str) -> None:
    tts = make_http_tts(emu, encoding=encoding)
    context = LLMContext()
    probe = Probe()
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), llm_turn(S1, S2, S3), rate=rate)

    assert not errors_of(up)
    down = probe.frames
    assert emu.stats.http_requests == 3  # one request per sentence
    assert emu.stats.ws_connections == 0
    assert sum(isinstance(f, TTSStartedFrame) for f in down) == 1
    assert sum(isinstance(f, TTSStoppedFrame) for f in down) == 1
    assert {f.sample_rate for f in down if isinstance(f, TTSAudioRawFrame)} == {rate}
    pcm = audio_of(down)
    t = 0.0
    for s in (S1, S2, S3):
        mid = segment(pcm, rate, t + 0.25 * tone_len(s), 0.5 * tone_len(s))
        assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(s), abs=15)
        t += tone_len(s)
    assert len(pcm) / 2 / rate == pytest.approx(t, abs=0.03)
    assert " ".join(words_of(down)) == f"{S1} {S2} {S3}"
    assert [m["content"] for m in context.messages if m["role"] == "assistant"] == [f"{S1} {S2} {S3}"]


async def test_no_voice_speaks_the_default_voice_over_the_websocket(emu: Emulator) -> None:
    """``voice=None`` (the default) means the server's default voice, which only the WebSocket has
    (``/tts/sse`` requires a voice): each sentence is one turn on one pooled socket, naming no voice."""
    tts = NineninesixHttpTTSService(emu.api_key, base_url=emu.base_url, stop_frame_timeout_s=60.0)
    assert tts.provider.options.voice is None  # type: ignore[attr-defined]
    _, up = await run(pipeline(tts, probe := Probe()), llm_turn(S1, S2), rate=24000)

    assert not errors_of(up)
    assert (emu.stats.http_requests, emu.stats.ws_connections) == (0, 1)
    requests = [m for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    assert [m["transcript"].strip() for m in requests] == [S1, S2]
    assert not [m for m in requests if "voice" in m]
    pcm = audio_of(probe.frames)
    assert len(pcm) / 2 / 24000 == pytest.approx(tone_len(S1) + tone_len(S2), abs=0.03)
    assert " ".join(words_of(probe.frames)) == f"{S1} {S2}"


async def test_frames_stream_as_events_arrive_and_barge_in_stops_them(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0
    tts = make_http_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [TTSSpeakFrame(S2), InterruptWhen(probe.first_audio), TTSSpeakFrame(NEXT)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    assert not errors_of(up)
    first, second = list(dict.fromkeys(f.context_id for f in probe.frames if isinstance(f, TTSAudioRawFrame)))
    # audio of the first request reached the pipeline while the server was still streaming it
    assert 0 < len(audio_of(probe.frames, first)) / 2 / 24000 < tone_len(S2)
    cut = next(i for i, f in enumerate(probe.frames) if f.name.startswith("InterruptionFrame"))
    assert not [
        f
        for f in probe.frames[cut:]
        if isinstance(f, (TTSAudioRawFrame, TTSTextFrame)) and f.context_id == first
    ]
    assert len(audio_of(probe.frames, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)


async def test_server_error_ends_the_turn_and_the_next_one_plays(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="warehouse", action="error", error_code="generation_failed", times=0))
    tts = make_http_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2, S3), WaitFor(probe.stopped), TTSSpeakFrame(NEXT)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    errors = errors_of(up)
    assert [e.category for e in errors] == [ErrorCategory.SERVER]
    assert tts.is_usable
    first, second = list(dict.fromkeys(f.context_id for f in probe.frames if isinstance(f, TTSAudioRawFrame)))
    # sentence 1 played; sentence 3 was never requested once the turn failed
    assert len(audio_of(probe.frames, first)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)
    words = [f.text for f in probe.frames if isinstance(f, TTSTextFrame) and f.context_id == first]
    assert words == S1.split()
    assert len(audio_of(probe.frames, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)


async def test_no_credits_fails_each_turn_once_and_keeps_the_service() -> None:
    """402 is QUOTA, which Pipecat treats as recoverable: each turn that meets an empty balance fails once (one
    request, no retry) and the service stays usable (a top-up would bring the next turn back)."""
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID, credits=5)) as emu:
        tts = make_http_tts(emu)
        down, up = await run(tts, [TTSSpeakFrame(S1), TTSSpeakFrame(NEXT)], rate=24000)

    errors = errors_of(up)
    assert [e.category for e in errors] == [ErrorCategory.QUOTA, ErrorCategory.QUOTA]
    assert tts.is_usable
    assert not audio_of(down)
    assert emu.stats.http_requests == 2


async def test_bad_key_is_fatal() -> None:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID, api_keys={"sk_996_right"})) as emu:
        tts = make_http_tts(emu, api_key="sk_996_wrong_one")
        down, up = await run(tts, [TTSSpeakFrame(S1)], rate=24000)

    errors = errors_of(up)
    assert [e.category for e in errors] == [ErrorCategory.AUTHENTICATION]
    assert "sk_996_wrong_one" not in errors[0].error
    assert not tts.is_usable
    assert not audio_of(down)


async def test_end_frame_mid_turn_over_http(emu: Emulator) -> None:
    tts = make_http_tts(emu)
    frames = [LLMFullResponseStartFrame(), *llm_turn(S1, S2)[1:-1]]  # no LLMFullResponseEndFrame
    down, up = await run(tts, frames, rate=24000)
    assert not errors_of(up)
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)
    assert emu.stats.http_requests == 1  # the text flushed after stop() is not sent
