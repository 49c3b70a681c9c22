"""An offline Pipecat pipeline: a scripted LLM streams tokens -> NineninesixTTSService (or KittaTTSService)
-> a WAV file.

With no ``base_url`` it starts the local emulator (eSpeak NG speech when available, else the tone voice), so
it runs with no network and no key; with ``base_url``/``api_key`` it talks to the real API. The core of
``examples/pipecat_bot.py`` and of ``ttsbridge demo``::

    stats = await run_demo("Hello! How can I help?", "out.wav")
    print(stats.audio_seconds, stats.first_audio_s, stats.transcript)
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pipecat.frames.frames import (
    EndFrame,
    ErrorFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMRunFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from ttsbridge import providers
from ttsbridge._redact import redact
from ttsbridge.audio.wav import write_wav
from ttsbridge.pipecat import build_service
from ttsbridge.policy.usage import TurnUsage, UsageTotals
from ttsbridge.providers import ProviderSpec

__all__ = ["DEMO_TEXT", "DemoStats", "ScriptedLLM", "run_demo"]

DEMO_TEXT = (
    "Hi, thanks for calling! I can see your order left the warehouse this morning. "
    "It should arrive by Friday afternoon. Is there anything else I can help you with?"
)


@dataclass
class DemoStats:
    """What one demo run produced."""

    out_path: str
    sample_rate: int
    audio_seconds: float
    #: seconds from the first LLM token to the first audio frame leaving the TTS
    first_audio_s: float | None
    #: the words the TTS reported as spoken (word-level TTSTextFrames)
    transcript: str
    #: ``"emulator"`` or the API base URL used
    endpoint: str
    voice: str | None
    errors: list[str] = field(default_factory=list)
    #: the usage ledger of the run's turns (``usage.report()``: one line)
    usage: UsageTotals = field(default_factory=UsageTotals)

    @property
    def ok(self) -> bool:
        return not self.errors and self.audio_seconds > 0

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    # ``dict(stats)`` works too (mapping protocol), for callers that print it.
    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]

    def __getitem__(self, key: str) -> Any:
        if key not in self.keys():
            raise KeyError(key)
        return getattr(self, key)


class ScriptedLLM(FrameProcessor):
    """Stands in for an LLM: on every ``LLMRunFrame`` it streams its next reply as small token frames between
    ``LLMFullResponseStartFrame`` and ``LLMFullResponseEndFrame``, like a real LLM service does."""

    def __init__(self, replies: Sequence[str], *, token_chars: int = 4, token_delay_s: float = 0.0) -> None:
        super().__init__()
        self._replies = list(replies)
        self._token_chars = max(1, token_chars)
        self._token_delay_s = token_delay_s
        self.first_token_at: float | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMRunFrame) and direction == FrameDirection.DOWNSTREAM:
            if self._replies:
                await self._stream(self._replies.pop(0))
            return
        await self.push_frame(frame, direction)

    async def _stream(self, reply: str) -> None:
        await self.push_frame(LLMFullResponseStartFrame())
        for i in range(0, len(reply), self._token_chars):
            if self.first_token_at is None:
                self.first_token_at = time.monotonic()
            await self.push_frame(LLMTextFrame(reply[i : i + self._token_chars]))
            if self._token_delay_s:
                await asyncio.sleep(self._token_delay_s)
        await self.push_frame(LLMFullResponseEndFrame())


class _Recorder(FrameProcessor):
    """Collects the audio and words that reach the end of the pipeline, and the errors that go upstream."""

    def __init__(self) -> None:
        super().__init__(enable_direct_mode=True)
        self.audio = bytearray()
        self.rate = 0
        self.words: list[str] = []
        self.errors: list[str] = []
        self.first_audio_at: float | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        elif direction == FrameDirection.DOWNSTREAM and isinstance(frame, TTSAudioRawFrame):
            if self.first_audio_at is None:
                self.first_audio_at = time.monotonic()
            self.rate = frame.sample_rate
            self.audio += frame.audio
        elif direction == FrameDirection.DOWNSTREAM and isinstance(frame, TTSTextFrame):
            self.words.append(frame.text)
        await self.push_frame(frame, direction)


async def run_demo(
    text: str | None = DEMO_TEXT,
    out_path: str | os.PathLike[str] = "ttsbridge-demo.wav",
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    voice: str | None = None,
    sample_rate: int = 24000,
    encoding: str = "pcm_s16le",
    token_delay_s: float = 0.0,
    timeout_s: float = 120.0,
    provider: str = providers.NAMES[0],
    **tts_kwargs: Any,
) -> DemoStats:
    """Speak ``text`` through a Pipecat pipeline (scripted LLM -> our TTS service) into ``out_path``.

    Args:
        text: what the scripted LLM "says" (streamed as small tokens); None or empty: :data:`DEMO_TEXT`.
        out_path: the WAV file to write (PCM16 mono at ``sample_rate``).
        base_url: the API; None starts the local emulator (offline, no key needed).
        api_key: the key for ``base_url`` (default ``$NINENINESIX_API_KEY`` / ``$KITTA_API_KEY``); ignored for
            the emulator.
        voice: voice id; None uses the server's default voice (Kitta needs one: on the emulator, its speech
            voice when eSpeak NG is available, else the tone voice).
        sample_rate: the pipeline's output rate.
        encoding: Nineninesix wire encoding (``pcm_s16le``, ``pcm_mulaw``, ``pcm_alaw``).
        token_delay_s: pause between LLM tokens, to mimic a real LLM's pace.
        timeout_s: bound on the whole run.
        provider: a registered provider (:data:`ttsbridge.providers.NAMES`; ``"nineninesix"`` by default):
            its Pipecat WebSocket service (:func:`ttsbridge.pipecat.build_service`).
        **tts_kwargs: more service arguments (``text_aggregation_mode``...).

    Returns:
        :class:`DemoStats`; ``errors`` lists the pipeline's error texts (keys redacted).
    """
    if provider not in providers.NAMES:
        allowed = ", ".join(repr(n) for n in providers.NAMES)
        raise ValueError(f"invalid provider={provider!r}; allowed: {allowed}")
    spec = providers.get(provider)
    text = text if text and text.strip() else DEMO_TEXT
    target = await _Target.open(spec, base_url, api_key, voice)
    try:
        key, url = target.api_key, target.base_url
        tts = build_service(provider, key, base_url=url, voice=target.voice, encoding=encoding, **tts_kwargs)
        usages: list[TurnUsage] = []

        @tts.event_handler("on_turn_usage")
        async def _on_usage(_tts: Any, usage: TurnUsage) -> None:
            usages.append(usage)

        llm = ScriptedLLM([text], token_delay_s=token_delay_s)
        head, tail = _Recorder(), _Recorder()
        await _run_pipeline([head, llm, tts, tail], sample_rate, timeout_s)
        return _result(out_path, target, llm, head, tail, sample_rate, usages)
    finally:
        await target.close()


def _result(
    out_path: str | os.PathLike[str],
    target: _Target,
    llm: ScriptedLLM,
    head: _Recorder,
    tail: _Recorder,
    sample_rate: int,
    usages: list[TurnUsage],
) -> DemoStats:
    """Write what reached the end of the pipeline to ``out_path``; what the run produced."""
    rate = tail.rate or sample_rate
    pcm = bytes(tail.audio)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    write_wav(out_path, pcm, rate)
    first = (
        tail.first_audio_at - llm.first_token_at
        if tail.first_audio_at is not None and llm.first_token_at is not None
        else None
    )
    return DemoStats(
        out_path=str(out_path),
        sample_rate=rate,
        audio_seconds=len(pcm) / 2 / rate,
        first_audio_s=first,
        transcript=" ".join(tail.words),
        endpoint=redact(target.endpoint, target.secrets),
        voice=target.voice,
        errors=[redact(e, target.secrets) for e in head.errors],
        usage=UsageTotals.of(usages),
    )


@dataclass
class _Target:
    """Where the demo speaks: the API at ``base_url``, or a local emulator it started (and stops)."""

    base_url: str
    api_key: str | None
    voice: str | None
    #: ``"emulator"`` or the API base URL
    endpoint: str
    secrets: tuple[str | None, ...]
    emulator: Any = None

    @classmethod
    async def open(
        cls, spec: ProviderSpec, base_url: str | None, api_key: str | None, voice: str | None
    ) -> _Target:
        secrets_env = tuple(os.environ.get(providers.get(name).key_env) for name in providers.NAMES)
        if base_url is not None:
            return cls(base_url, api_key, voice, base_url, (api_key, *secrets_env))
        from ttsbridge.emulator import (
            SPEECH_VOICE_ID,
            TONE_VOICE_ID,
            Emulator,
            EmulatorConfig,
            speech_available,
        )

        emulator = await Emulator(EmulatorConfig()).start()
        api_key = emulator.api_key_for(spec.name)
        if not spec.has_default_voice:
            voice = voice or (SPEECH_VOICE_ID if speech_available() else TONE_VOICE_ID)
        return cls(emulator.base_url, api_key, voice, "emulator", (api_key, *secrets_env), emulator)

    async def close(self) -> None:
        if self.emulator is not None:
            await self.emulator.stop()


async def _run_pipeline(processors: list[Any], sample_rate: int, timeout_s: float) -> None:
    """Run ``processors`` as one pipeline: one ``LLMRunFrame`` then ``EndFrame``, bounded by ``timeout_s``."""
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(audio_out_sample_rate=sample_rate),
        cancel_on_idle_timeout=False,
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _on_started(_worker: Any, _frame: Any) -> None:
        started.set()

    async def drive() -> None:
        await asyncio.wait_for(started.wait(), 30.0)
        await worker.queue_frames([LLMRunFrame(), EndFrame()])

    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), drive()), timeout_s)
