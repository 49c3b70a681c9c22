"""A whole phone call on loopback: a Pipecat bot (Twilio serializer on the WebSocket server transport, user and
assistant context aggregators, a scripted LLM, our TTS) and a caller that plays Twilio's part.

* :class:`KeypadSTT` stands where the STT goes: the caller presses a key (a Twilio ``dtmf`` event, through the
  transport's input) and it reports a scripted utterance as an STT with its own turn detection does
  (proposed start of turn, transcription, proposed end of turn). The user aggregator decides the turn and
  broadcasts the interruption, as with a real STT.
* :class:`ContextLLM` answers the context the user aggregator sends, and keeps every context it was given.
* :class:`Caller` is Twilio: it sends ``connected``/``start``, plays the ``media`` it gets in real time (a
  jitter buffer that empties at one second per second), and honours ``clear`` by dropping what is buffered.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from pipecat.frames.frames import (
    EndWorkerFrame,
    Frame,
    InputDTMFFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    ProposedUserStartedSpeakingFrame,
    ProposedUserStoppedSpeakingFrame,
    TranscriptionFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.server import (
    SingleClientWebsocketServerParams,
    SingleClientWebsocketServerTransport,
)
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies
from pipecat.workers.runner import WorkerRunner

from support import free_port
from ttsbridge.audio.g711 import ulaw_decode
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.pipecat import KittaTTSService, NineninesixTTSService

RATE = 8000  # Twilio: 8 kHz μ-law
BOUND = 15.0  # outer bound on any wait of these tests


# ----------------------------------------------------------------------------------------------------
# the bot


class KeypadSTT(FrameProcessor):
    """The STT stand-in. Key ``d`` pressed by the caller: the user starts saying ``utterances[d]`` (a proposed
    start of turn, which interrupts the bot); ``#``: they finished (the final transcription, then a proposed
    end of turn), as an STT reports a final transcript some time after the speech began."""

    def __init__(self, utterances: dict[str, str]) -> None:
        super().__init__()
        self._utterances = utterances
        self._pending: str | None = None

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, InputDTMFFrame):
            await self.push_frame(frame, direction)
            return
        key = frame.button.value
        if key in self._utterances:
            self._pending = self._utterances[key]
            await self.push_frame(ProposedUserStartedSpeakingFrame())
        elif key == "#" and self._pending is not None:
            text, self._pending = self._pending, None
            await self.push_frame(TranscriptionFrame(text, "caller", time.strftime("%Y-%m-%dT%H:%M:%S")))
            await self.push_frame(ProposedUserStoppedSpeakingFrame())


class ContextLLM(FrameProcessor):
    """Answers the last user message of each context with its scripted reply, streamed in 4-character tokens."""

    def __init__(self, replies: dict[str, str]) -> None:
        super().__init__()
        self._replies = replies
        #: every context it was asked to answer (a copy of its messages at that moment)
        self.seen: list[list[dict[str, Any]]] = []

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if not isinstance(frame, LLMContextFrame):
            await self.push_frame(frame, direction)
            return
        messages = copy.deepcopy(list(frame.context.get_messages()))
        self.seen.append(messages)
        users = [m for m in messages if m.get("role") == "user"]
        reply = self._replies.get(_text(users[-1]) if users else "", "")
        await self.push_frame(LLMFullResponseStartFrame())
        for i in range(0, len(reply), 4):
            await self.push_frame(LLMTextFrame(reply[i : i + 4]))
        await self.push_frame(LLMFullResponseEndFrame())


def _text(message: dict[str, Any]) -> str:
    content = message.get("content", "")
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def assistant_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [_text(m) for m in messages if m.get("role") == "assistant"]


class TwilioStreamSerializer(TwilioFrameSerializer):
    """``TwilioFrameSerializer`` that learns the stream id from Twilio's ``start`` event (a plain WebSocket
    server transport has no web framework to read it first), as in examples/pipecat_twilio_bot.py."""

    def __init__(self) -> None:
        super().__init__(stream_sid="", params=TwilioFrameSerializer.InputParams(auto_hang_up=False))

    async def deserialize(self, data: str | bytes) -> Frame | None:
        with contextlib.suppress(ValueError, TypeError):
            message = json.loads(data)
            if message.get("event") == "start":
                self._stream_sid = message.get("start", {}).get("streamSid", "")
                return None
        return await super().deserialize(data)


@dataclass
class Bot:
    url: str
    llm: ContextLLM
    context: LLMContext
    worker: PipelineWorker


@contextlib.asynccontextmanager
async def phone_bot(
    tts: FrameProcessor, replies: dict[str, str], utterances: dict[str, str]
) -> AsyncIterator[Bot]:
    """Runs the bot (``PipelineWorker`` under a ``WorkerRunner``) until the block ends; the caller's hang-up
    ends the worker."""
    port = free_port()
    transport = SingleClientWebsocketServerTransport(
        params=SingleClientWebsocketServerParams(
            serializer=TwilioStreamSerializer(),
            audio_in_enabled=True,
            audio_out_enabled=True,
            add_wav_header=False,
        ),
        host="127.0.0.1",
        port=port,
    )
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=ExternalUserTurnStrategies())
    )
    llm = ContextLLM(replies)
    pipeline = Pipeline(
        [
            transport.input(),
            KeypadSTT(utterances),
            aggregators.user(),
            llm,
            tts,
            transport.output(),
            aggregators.assistant(),
        ]
    )
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_in_sample_rate=RATE, audio_out_sample_rate=RATE),
        cancel_on_idle_timeout=False,
    )
    ready = asyncio.Event()

    @transport.event_handler("on_websocket_ready")
    async def _ready(_transport: Any) -> None:
        ready.set()

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: Any, _ws: Any) -> None:
        await worker.queue_frame(EndWorkerFrame(reason="caller hung up"))

    runner = WorkerRunner(handle_sigint=False)
    task = asyncio.create_task(_run(runner, worker), name="phone_bot")
    try:
        await asyncio.wait_for(ready.wait(), BOUND)
        yield Bot(f"ws://127.0.0.1:{port}", llm, context, worker)
        await asyncio.wait_for(asyncio.shield(task), BOUND)
    finally:
        if not task.done():
            await asyncio.wait_for(worker.cancel(), BOUND)
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(task, BOUND)


async def _run(runner: WorkerRunner, worker: PipelineWorker) -> None:
    await runner.add_workers(worker)
    await runner.run()


# ----------------------------------------------------------------------------------------------------
# the caller


@dataclass
class Heard:
    """One stretch of the call between ``clear``s (or the start): what arrived and what was played."""

    ulaw: bytearray = field(default_factory=bytearray)
    started_at: float | None = None  # when its first media arrived (playback starts)
    buffered_until: float = 0.0  # when the jitter buffer runs dry at this rate of arrival
    played_at_clear: float | None = None  # seconds played when a clear ended it

    @property
    def received(self) -> float:
        return len(self.ulaw) / RATE

    def played(self, now: float) -> float:
        if self.played_at_clear is not None:
            return self.played_at_clear
        if self.started_at is None:
            return 0.0
        return self.received - max(0.0, self.buffered_until - now)

    @property
    def pcm(self) -> bytes:
        return ulaw_decode(bytes(self.ulaw))


class Caller:
    """Twilio's side of the media stream (see the module docstring)."""

    def __init__(self, ws: Any) -> None:
        self._ws = ws
        self.stretches: list[Heard] = [Heard()]
        self.events: list[str] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    @contextlib.asynccontextmanager
    async def dial(cls, url: str) -> AsyncIterator[Caller]:
        from websockets.asyncio.client import connect

        async with connect(url) as ws:
            caller = cls(ws)
            await ws.send(json.dumps({"event": "connected", "protocol": "Call", "version": "1.0.0"}))
            start = {"streamSid": "MZtest", "callSid": "CAtest"}
            await ws.send(json.dumps({"event": "start", "streamSid": "MZtest", "start": start}))
            caller._task = asyncio.create_task(caller._receive(), name="Caller.receive")
            try:
                yield caller
            finally:
                caller._task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await caller._task

    async def press(self, digit: str) -> None:
        await self._ws.send(json.dumps({"event": "dtmf", "streamSid": "MZtest", "dtmf": {"digit": digit}}))

    async def say(self, digit: str) -> None:
        """The caller says utterance ``digit`` (see :class:`KeypadSTT`): its start, then its end."""
        await self.press(digit)
        await self.press("#")

    @property
    def current(self) -> Heard:
        return self.stretches[-1]

    def played(self) -> float:
        return self.current.played(time.monotonic())

    async def wait_until(self, cond: Callable[[], bool], timeout: float = BOUND) -> None:
        """Wait (bounded) until ``cond()`` holds; re-checked on every message from the bot."""

        async def _wait() -> None:
            while not cond():
                await self._changed.wait()

        await asyncio.wait_for(_wait(), timeout)

    async def wait_played(self, seconds: float, timeout: float = BOUND) -> None:
        """Wait until ``seconds`` of the current stretch have played (the buffer holds that much, and that
        much time has passed since playback started)."""
        await self.wait_until(lambda: self.current.received >= seconds, timeout)
        stretch = self.current
        assert stretch.started_at is not None
        delay = stretch.started_at + seconds - time.monotonic()
        if delay > 0:  # playing the buffered audio out, in real time
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed_to_clear(stretch), delay)

    async def _changed_to_clear(self, stretch: Heard) -> None:
        while stretch.played_at_clear is None:
            await self._changed.wait()

    async def _receive(self) -> None:
        async for raw in self._ws:
            msg = json.loads(raw)
            kind = msg.get("event", "?")
            self.events.append(kind)
            now = time.monotonic()
            if kind == "media":
                chunk = base64.b64decode(msg["media"]["payload"])
                s = self.current
                if s.started_at is None:
                    s.started_at = s.buffered_until = now
                s.buffered_until = max(s.buffered_until, now) + len(chunk) / RATE
                s.ulaw.extend(chunk)
            elif kind == "clear" and self.current.received > 0:  # a clear with nothing buffered is a no-op
                self.current.played_at_clear = self.current.played(now)
                self.stretches.append(Heard())
            self._changed.set()
            self._changed = asyncio.Event()


def make_phone_tts(emu: Emulator, provider: str, voice: str = TONE_VOICE_ID) -> FrameProcessor:
    """The bot's TTS on the emulator: Kitta, or Nineninesix sending G.711 (what a phone line carries)."""
    if provider == "kitta":
        return KittaTTSService(
            emu.config.kitta.a_valid_key(),
            base_url=emu.base_url,
            settings=KittaTTSService.Settings(voice=voice),
            provider_options={"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0},
        )
    return NineninesixTTSService(
        emu.api_key,
        base_url=emu.base_url,
        encoding="pcm_mulaw",
        settings=NineninesixTTSService.Settings(voice=voice),
    )
