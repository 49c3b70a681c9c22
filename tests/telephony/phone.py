"""A phone bot on loopback for the carrier-playback tests: a Pipecat pipeline behind one carrier's Pipecat
serializer (wrapped in ``PlaybackAcks``, or not), on the WebSocket server transport, and an
:class:`~ttsbridge.emulator.carrier.EmulatedCarrier` calling it.

The bot is the one ``tests/pipecat/call_helpers.py`` builds (keypad STT, the user and assistant context
aggregators, a scripted LLM, our TTS on the emulator) with the carrier's serializer in place of Twilio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipecat.frames.frames import EndWorkerFrame, Frame, LLMFullResponseEndFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.serializers.base_serializer import FrameSerializer
from pipecat.transports.websocket.server import (
    SingleClientWebsocketServerParams,
    SingleClientWebsocketServerTransport,
)
from pipecat.turns.user_turn_strategies import ExternalUserTurnStrategies
from pipecat.workers.runner import WorkerRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "pipecat"))

from call_helpers import ContextLLM, KeypadSTT, assistant_texts, make_phone_tts

from support import free_port
from ttsbridge.emulator import Emulator
from ttsbridge.emulator.carrier import CarrierConfig, EmulatedCarrier
from ttsbridge.pipecat.telephony import CallPlayback, PlaybackAcks

__all__ = [
    "BOUND",
    "PIPELINE_RATE",
    "Bot",
    "ContextLLM",
    "KeypadSTT",
    "assistant_texts",
    "carrier_serializer",
    "make_phone_tts",
    "phone_call",
]

BOUND = 20.0  # outer bound on any wait of these tests
STREAM_ID = "MZ0123456789abcdef0123456789abcdef"

#: The pipeline (and TTS) rate per carrier: 8 kHz μ-law for Twilio and Exotel, 16 kHz for Telnyx and Plivo
#: (their serializers resample to the 8 kHz leg: Pipecat's send PCMU / audio/x-mulaw, which those carriers
#: take at 8 kHz; docs/telephony.md).
PIPELINE_RATE = {"twilio": 8000, "exotel": 8000, "telnyx": 16000, "plivo": 16000}


def carrier_serializer(carrier: str) -> FrameSerializer:
    """The carrier's own Pipecat serializer for the emulated call (stream id known, no REST hang-up)."""
    if carrier == "twilio":
        from pipecat.serializers.twilio import TwilioFrameSerializer

        return TwilioFrameSerializer(STREAM_ID, params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
    if carrier == "telnyx":
        from pipecat.serializers.telnyx import TelnyxFrameSerializer

        return TelnyxFrameSerializer(
            STREAM_ID, "PCMU", "PCMU", params=TelnyxFrameSerializer.InputParams(auto_hang_up=False)
        )
    if carrier == "exotel":
        from pipecat.serializers.exotel import ExotelFrameSerializer

        return ExotelFrameSerializer(STREAM_ID)
    from pipecat.serializers.plivo import PlivoFrameSerializer

    return PlivoFrameSerializer(STREAM_ID, params=PlivoFrameSerializer.InputParams(auto_hang_up=False))


class ScriptedLLM(ContextLLM):
    """:class:`ContextLLM` that ends the call (an ``EndWorkerFrame`` pushed downstream, as Pipecat asks) after
    the replies to the utterances in ``end_after``."""

    def __init__(self, replies: dict[str, str], end_after: frozenset[str] = frozenset()) -> None:
        super().__init__(replies)
        self._end_after = end_after

    async def push_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        await super().push_frame(frame, direction)
        if isinstance(frame, LLMFullResponseEndFrame) and self.seen:
            users = [m for m in self.seen[-1] if m.get("role") == "user"]
            said = str(users[-1].get("content", "")) if users else ""
            if said in self._end_after:
                await super().push_frame(EndWorkerFrame(reason="goodbye said"))


@dataclass
class Bot:
    url: str
    llm: ScriptedLLM
    context: LLMContext
    worker: PipelineWorker
    call: CallPlayback | None
    tts: FrameProcessor
    #: the usage reported by the TTS (``on_turn_usage``), in order
    usage: list[Any]

    def kept(self, index: int = -1) -> str:
        """The last assistant message of the ``index``-th context the LLM was given."""
        return assistant_texts(self.llm.seen[index])[-1]


@contextlib.asynccontextmanager
async def phone_call(
    emu: Emulator,
    *,
    carrier: str,
    provider: str,
    acks: bool = True,
    replies: dict[str, str] | None = None,
    utterances: dict[str, str] | None = None,
    end_after: frozenset[str] = frozenset(),
    jitter_buffer_s: float = 0.6,
    network_delay_s: float = 0.03,
    echo_marks: bool = True,
    margin_s: float = 1.0,
    voice: str | None = None,
    tracing: bool = False,
) -> AsyncIterator[tuple[Bot, EmulatedCarrier]]:
    """A bot behind ``carrier``'s serializer (in ``PlaybackAcks`` with ``acks``) and the emulated carrier
    calling it. The bot runs until the block ends; the carrier's hang-up ends it."""
    rate = PIPELINE_RATE[carrier]
    inner = carrier_serializer(carrier)
    serializer: FrameSerializer = PlaybackAcks(inner, margin_s=margin_s) if acks else inner
    port = free_port()
    transport = SingleClientWebsocketServerTransport(
        params=SingleClientWebsocketServerParams(
            serializer=serializer, audio_in_enabled=True, audio_out_enabled=True, add_wav_header=False
        ),
        host="127.0.0.1",
        port=port,
    )
    context = LLMContext()
    aggregators = LLMContextAggregatorPair(
        context, user_params=LLMUserAggregatorParams(user_turn_strategies=ExternalUserTurnStrategies())
    )
    llm = ScriptedLLM(replies or {}, end_after)
    tts = make_phone_tts(emu, provider, voice) if voice else make_phone_tts(emu, provider)
    usage: list[Any] = []

    @tts.event_handler("on_turn_usage")
    async def _usage(_service: Any, turn_usage: Any) -> None:
        usage.append(turn_usage)

    processors: list[FrameProcessor] = [
        transport.input(),
        KeypadSTT(utterances or {}),
        aggregators.user(),
        llm,
        tts,
        transport.output(),
        aggregators.assistant(),
    ]
    worker = PipelineWorker(
        Pipeline(processors),
        params=PipelineParams(audio_in_sample_rate=rate, audio_out_sample_rate=rate),
        cancel_on_idle_timeout=False,
        enable_tracing=tracing,
    )
    ready = asyncio.Event()

    @transport.event_handler("on_websocket_ready")
    async def _ready(_transport: Any) -> None:
        ready.set()

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: Any, _ws: Any) -> None:
        await worker.queue_frame(EndWorkerFrame(reason="caller hung up"))

    runner = WorkerRunner(handle_sigint=False)
    task = asyncio.create_task(_run(runner, worker), name="phone_call")
    config = CarrierConfig(
        carrier=carrier,  # type: ignore[arg-type]
        sample_rate=8000,
        jitter_buffer_s=jitter_buffer_s,
        network_delay_s=network_delay_s,
        echo_marks=echo_marks,
        stream_id=STREAM_ID,
    )
    call = serializer.call if isinstance(serializer, PlaybackAcks) else None
    try:
        await asyncio.wait_for(ready.wait(), BOUND)
        bot = Bot(f"ws://127.0.0.1:{port}", llm, context, worker, call, tts, usage)
        async with EmulatedCarrier.dial(bot.url, config) as phone:
            yield bot, phone
            await asyncio.wait_for(asyncio.shield(task), BOUND)
    finally:
        if not task.done():
            await asyncio.wait_for(worker.cancel(), BOUND)
            with contextlib.suppress(asyncio.CancelledError, asyncio.TimeoutError):
                await asyncio.wait_for(task, BOUND)


async def _run(runner: WorkerRunner, worker: PipelineWorker) -> None:
    await runner.add_workers(worker)
    await runner.run()
