"""Pipecat's own ``CartesiaTTSService`` (``url=`` override) speaks to the emulator."""

from __future__ import annotations

import pytest
from pipecat.frames.frames import (
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.worker import PipelineParams
from pipecat.services.cartesia.tts import CartesiaTTSService
from pipecat.tests.utils import run_test

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency


def service(emu: Emulator) -> CartesiaTTSService:
    return CartesiaTTSService(
        api_key=emu.api_key,
        url=emu.ws_url,
        settings=CartesiaTTSService.Settings(voice="tone", model="gepard-1.0"),
    )


@pytest.mark.parametrize("rate", [16000, 22050])
async def test_speak_frame(emulator: Emulator, rate: int) -> None:
    text = "Hello from Pipecat."
    down, _up = await run_test(
        service(emulator),
        frames_to_send=[TTSSpeakFrame(text)],
        pipeline_params=PipelineParams(audio_out_sample_rate=rate),
    )
    frames = [f for f in down if isinstance(f, TTSAudioRawFrame)]
    audio = b"".join(f.audio for f in frames)
    assert frames and all(f.sample_rate == rate for f in frames)
    assert abs(len(audio) // 2 - round(tone_duration(text) * rate)) <= 2
    assert dominant_frequency(audio, rate) == pytest.approx(tone_frequency(text), abs=12)
    assert any(isinstance(f, TTSStoppedFrame) for f in down)
    sent = emulator.stats.messages_of(1)
    assert sent[-1]["continue"] is False and sent[-1]["transcript"] == ""


async def test_llm_text_two_sentences_one_context(emulator: Emulator) -> None:
    frames = [
        LLMFullResponseStartFrame(),
        LLMTextFrame("Hello there. "),
        LLMTextFrame("How are "),
        LLMTextFrame("you today?"),
        LLMFullResponseEndFrame(),
    ]
    down, _up = await run_test(
        service(emulator), frames_to_send=frames, pipeline_params=PipelineParams(audio_out_sample_rate=16000)
    )
    audio = b"".join(f.audio for f in down if isinstance(f, TTSAudioRawFrame))
    transcripts = [m["transcript"] for m in emulator.stats.messages_of(1) if m["transcript"]]
    assert transcripts == ["Hello there.", "How are you today?"]
    assert len({m["context_id"] for m in emulator.stats.messages_of(1)}) == 1
    split = round(tone_duration(transcripts[0]) * 16000) * 2
    assert dominant_frequency(audio[:split], 16000) == pytest.approx(tone_frequency(transcripts[0]), abs=12)
    assert dominant_frequency(audio[split:], 16000) == pytest.approx(tone_frequency(transcripts[1]), abs=12)


async def test_pipeline_rate_24000_is_rejected_by_the_server(emulator: Emulator) -> None:
    # Pipecat sends the pipeline rate as-is; the API has no 24000, so the turn gets no audio (see anchors.md).
    down, up = await run_test(
        service(emulator),
        frames_to_send=[TTSSpeakFrame("No audio at 24 kHz.")],
        pipeline_params=PipelineParams(audio_out_sample_rate=24000),
    )
    assert not [f for f in down if isinstance(f, TTSAudioRawFrame)]
    assert any(isinstance(f, ErrorFrame) and "invalid_sample_rate" in f.error for f in up)
    assert (1, "invalid_sample_rate") in emulator.stats.errors_sent
