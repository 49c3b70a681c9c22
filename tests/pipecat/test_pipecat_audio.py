"""Output rates x wire encodings, and telephony: our frames through Pipecat's TwilioFrameSerializer."""

from __future__ import annotations

import base64
import json

import pytest
from pc_helpers import (
    S2,
    Gate,
    InterruptWhen,
    Probe,
    audio_frames,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    segment,
    tone_len,
)
from pipecat.frames.frames import Frame, InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor, FrameProcessorSetup
from pipecat.serializers.twilio import TwilioFrameSerializer

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.audio.g711 import ulaw_decode
from ttsbridge.emulator import Emulator, tone_frequency

ENCODINGS = ["pcm_s16le", "pcm_mulaw", "pcm_alaw"]


def output_formats(emu: Emulator) -> list[dict]:
    return [m["output_format"] for _, m in emu.stats.messages if "output_format" in m]


@pytest.mark.parametrize("rate", [8000, 16000, 24000, 48000])
@pytest.mark.parametrize("encoding", ENCODINGS)
async def test_output_rate_and_encoding_preserve_the_tone(emu: Emulator, rate: int, encoding: str) -> None:
    tts = make_tts(emu, encoding=encoding)
    down, up = await run(tts, [TTSSpeakFrame(S2)], rate=rate)

    assert not errors_of(up)
    frames = audio_frames(down)
    assert frames and {f.sample_rate for f in frames} == {rate}
    assert {f.num_channels for f in frames} == {1}
    assert all(len(f.audio) % 2 == 0 for f in frames)
    pcm = audio_of(down)
    assert len(pcm) / 2 / rate == pytest.approx(tone_len(S2), abs=0.02)
    mid = segment(pcm, rate, 0.25 * tone_len(S2), 0.5 * tone_len(S2))
    assert dominant_frequency(mid, rate) == pytest.approx(tone_frequency(S2), abs=15)
    # the server was asked for a rate it has: the pipeline's when it can, else 22050 and resampled here
    wire = {(f["encoding"], f["sample_rate"]) for f in output_formats(emu)}
    assert wire == {(encoding, rate if rate in (8000, 16000) else 22050)}


class TwilioSink(FrameProcessor):
    """What a Twilio media stream would be sent: Pipecat's TwilioFrameSerializer applied to our frames."""

    def __init__(self) -> None:
        super().__init__(enable_direct_mode=True)
        self.serializer = TwilioFrameSerializer(
            "MZ00000000000000000000000000000000",
            params=TwilioFrameSerializer.InputParams(auto_hang_up=False),
        )
        self.messages: list[dict] = []

    async def setup(self, setup: FrameProcessorSetup) -> None:
        await super().setup(setup)
        await self.serializer.setup(setup)

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM and isinstance(
            frame, (TTSAudioRawFrame, InterruptionFrame)
        ):
            out = await self.serializer.serialize(frame)
            if out:
                self.messages.append(json.loads(out))
        await self.push_frame(frame, direction)

    def ulaw(self, messages: list[dict] | None = None) -> bytes:
        msgs = self.messages if messages is None else messages
        return b"".join(base64.b64decode(m["media"]["payload"]) for m in msgs if m["event"] == "media")


@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_mulaw"])
async def test_twilio_8khz_payloads_decode_to_the_tone(emu: Emulator, encoding: str) -> None:
    tts = make_tts(emu, encoding=encoding)
    sink = TwilioSink()
    _, up = await run(pipeline(tts, sink), [TTSSpeakFrame(S2)], rate=8000)

    assert not errors_of(up)
    assert {(f["encoding"], f["sample_rate"]) for f in output_formats(emu)} == {(encoding, 8000)}
    ulaw = sink.ulaw()
    # 8 kHz μ-law: one byte per sample, the whole utterance
    assert len(ulaw) / 8000 == pytest.approx(tone_len(S2), abs=0.02)
    pcm = ulaw_decode(ulaw)
    mid = segment(pcm, 8000, 0.25 * tone_len(S2), 0.5 * tone_len(S2))
    assert dominant_frequency(mid, 8000) == pytest.approx(tone_frequency(S2), abs=15)


async def test_twilio_barge_in_clears_and_plays_only_the_next_turn(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0
    tts = make_tts(emu, encoding="pcm_mulaw")
    gate, probe, sink = Gate(), Probe(), TwilioSink()
    after = "Of course."
    frames = [TTSSpeakFrame(S2), InterruptWhen(probe.first_audio), TTSSpeakFrame(after)]
    _, up = await run(pipeline(gate, tts, probe, sink), frames, rate=8000)

    assert not errors_of(up)
    events = [m["event"] for m in sink.messages]
    assert events.count("clear") == 1
    cut = events.index("clear")
    assert 0 < len(sink.ulaw(sink.messages[:cut])) / 8000 < tone_len(S2)
    pcm = ulaw_decode(sink.ulaw(sink.messages[cut + 1 :]))
    assert len(pcm) / 2 / 8000 == pytest.approx(tone_len(after), abs=0.02)
    mid = segment(pcm, 8000, 0.25 * tone_len(after), 0.5 * tone_len(after))
    assert dominant_frequency(mid, 8000) == pytest.approx(tone_frequency(after), abs=15)
    assert emu.stats.ws_connections == 1
