"""Helpers for the Pipecat service tests: a probe that records what reached downstream, a gate that holds
frames (or interrupts) until an event happens (no sleeps as synchronisation), and frame/audio accessors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import (
    ControlFrame,
    ErrorFrame,
    Frame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.tests.utils import run_test

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.pipecat import NineninesixTTSService

S1 = "Hello there, it is good to hear from you."
S2 = "Your order left the warehouse this morning."
S3 = "It should arrive by Friday afternoon."

#: Bound on one pipeline run; every test finishes far below it.
RUN_TIMEOUT = (
    45.0  # a hang bound, not a timing: the 40-sentence turn takes ~7 s alone, 20+ s on a loaded machine
)


def make_tts(emu: Emulator, **kwargs: Any) -> NineninesixTTSService:
    settings = kwargs.pop("settings", None) or NineninesixTTSService.Settings(voice=TONE_VOICE_ID)
    api_key = kwargs.pop("api_key", emu.api_key)
    return NineninesixTTSService(api_key, base_url=emu.base_url, settings=settings, **kwargs)


class Probe(FrameProcessor):
    """Records every frame in the order it was pushed (direct mode: no queue, nothing dropped on
    interruption) and signals the first audio frame."""

    def __init__(self, words: int = 1) -> None:
        super().__init__(enable_direct_mode=True)
        self.frames: list[Frame] = []
        self.first_audio = asyncio.Event()
        #: set once ``words`` TTSTextFrames have passed
        self.words_seen = asyncio.Event()
        #: set by the first TTSStoppedFrame
        self.stopped = asyncio.Event()
        self._words_wanted = words

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            self.frames.append(frame)
            if isinstance(frame, TTSAudioRawFrame):
                self.first_audio.set()
            if sum(isinstance(f, TTSTextFrame) for f in self.frames) >= self._words_wanted:
                self.words_seen.set()
            if isinstance(frame, TTSStoppedFrame):
                self.stopped.set()
        await self.push_frame(frame, direction)


@dataclass
class WaitFor(ControlFrame):
    """Gate instruction: hold the frames behind this one until ``event`` is set."""

    event: asyncio.Event = field(default_factory=asyncio.Event)
    timeout: float = 10.0


@dataclass
class InterruptWhen(WaitFor):
    """Gate instruction: once ``event`` is set, push an InterruptionFrame downstream."""


class Gate(FrameProcessor):
    """Passes frames on in order; a :class:`WaitFor` holds the frames behind it until its event is set (an
    :class:`InterruptWhen` then interrupts). Lets a test interrupt "while audio is playing", or start the next
    turn once the previous one ended, without sleeping."""

    def __init__(self) -> None:
        super().__init__()
        self.fired = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, WaitFor):
            await asyncio.wait_for(frame.event.wait(), frame.timeout)
            if isinstance(frame, InterruptWhen):
                await self.push_frame(InterruptionFrame())
            self.fired.set()
        else:
            await self.push_frame(frame, direction)


async def run(
    processor: FrameProcessor,
    frames: Sequence[Frame],
    *,
    rate: int = 24000,
    metrics: bool = False,
) -> tuple[list[Frame], list[Frame]]:
    params = PipelineParams(audio_out_sample_rate=rate, enable_metrics=metrics, enable_usage_metrics=metrics)
    down, up = await asyncio.wait_for(
        run_test(processor, frames_to_send=list(frames), pipeline_params=params, start_timeout=10.0),
        RUN_TIMEOUT,
    )
    return list(down), list(up)


def pipeline(*processors: FrameProcessor) -> Pipeline:
    return Pipeline(list(processors))


def audio_of(frames: Sequence[Frame], context_id: str | None = None) -> bytes:
    return b"".join(
        f.audio
        for f in frames
        if isinstance(f, TTSAudioRawFrame) and (context_id is None or f.context_id == context_id)
    )


def audio_frames(frames: Sequence[Frame]) -> list[TTSAudioRawFrame]:
    return [f for f in frames if isinstance(f, TTSAudioRawFrame)]


def words_of(frames: Sequence[Frame]) -> list[str]:
    return [f.text for f in frames if isinstance(f, TTSTextFrame)]


def errors_of(frames: Sequence[Frame]) -> list[ErrorFrame]:
    return [f for f in frames if isinstance(f, ErrorFrame)]


def segment(pcm: bytes, rate: int, start_s: float, dur_s: float) -> bytes:
    a = int(start_s * rate) * 2
    return pcm[a : a + int(dur_s * rate) * 2]


def tone_len(text: str) -> float:
    """Seconds of audio the emulator's tone voice gives a transcript (~60 ms per character)."""
    return max(0.1, 0.06 * len(text.strip()))
