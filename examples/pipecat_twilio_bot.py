"""A phone bot skeleton: Twilio Media Streams <-> Pipecat <-> NineninesixTTSService, 8 kHz μ-law end to end.

The pipeline runs at 8 kHz; the TTS asks the server for 8 kHz μ-law (half the bytes of PCM16 on the wire),
decodes it to PCM16 frames, and Pipecat's ``TwilioFrameSerializer`` turns them back into the μ-law
``media`` payloads Twilio plays. On barge-in the serializer sends Twilio a ``clear`` and the TTS cancels its
server context, so the caller hears nothing stale.

The one line a phone bot adds for carrier playback acknowledgements (docs/telephony.md) is the serializer's
wrapper, ``PlaybackAcks(...)`` in ``run_bot``: the bot then sends Twilio a ``mark`` at each word and at the
end of each reply, an interruption keeps in the LLM context the words Twilio says it played, and the hang-up
(``hang_up=True``) waits until the goodbye has played instead of cutting it off.

Put your STT and LLM where the ``ScriptedLLM`` stands (see ``build_pipeline``).

Run it against the emulator, no Twilio account needed: the script starts the emulator and the bot's
WebSocket server, then plays Twilio's part with an emulated carrier (it connects, sends
``connected``/``start``, plays the ``media`` in real time behind a jitter buffer, echoes each ``mark`` once
its audio has played) and writes what the caller heard to a WAV file::

    python examples/pipecat_twilio_bot.py --emulator --out call.wav --jitter-buffer 0.6

Run it for real: start the bot, expose it over wss:// (e.g. ``ngrok http 8765``), and point your Twilio number
at TwiML like ``<Response><Connect><Stream url="wss://YOUR-HOST/"/></Connect></Response>``::

    NINENINESIX_API_KEY=sk_996_... python examples/pipecat_twilio_bot.py --port 8765 --voice VOICE_ID
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
from dataclasses import dataclass
from typing import Any

from loguru import logger
from pipecat.frames.frames import (
    EndWorkerFrame,
    Frame,
    LLMRunFrame,
    SystemFrame,
    TTSSpeakFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.serializers.twilio import TwilioFrameSerializer
from pipecat.transports.websocket.server import (
    SingleClientWebsocketServerParams,
    SingleClientWebsocketServerTransport,
)
from pipecat.workers.runner import WorkerRunner

from ttsbridge.audio.wav import write_wav
from ttsbridge.demo import ScriptedLLM
from ttsbridge.pipecat import NineninesixTTSService
from ttsbridge.pipecat.telephony import PlaybackAcks

TWILIO_RATE = 8000
GREETING = "Hello, thanks for calling."
REPLY = "Your order left the warehouse this morning. It should arrive by Friday."


@dataclass
class CallStartedFrame(SystemFrame):
    """Twilio's ``start`` event: the media stream is open."""

    stream_sid: str = ""
    call_sid: str | None = None


class TwilioStreamSerializer(TwilioFrameSerializer):
    """``TwilioFrameSerializer`` that learns the stream from Twilio's ``start`` event, so it can sit in a plain
    WebSocket server transport (no web framework needed to read the first messages)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("params", TwilioFrameSerializer.InputParams(auto_hang_up=False))
        super().__init__(stream_sid="", **kwargs)

    async def deserialize(self, data: str | bytes) -> Frame | None:
        try:
            message = json.loads(data)
        except (ValueError, TypeError):
            return None
        if message.get("event") == "start":
            start = message.get("start", {})
            self._stream_sid = start.get("streamSid") or message.get("streamSid", "")
            self._call_sid = start.get("callSid")
            return CallStartedFrame(stream_sid=self._stream_sid, call_sid=self._call_sid)
        return await super().deserialize(data)


class CallScript(FrameProcessor):
    """Greets when the call starts, asks the (scripted) LLM for a reply, and hangs up once both were spoken
    if ``hang_up`` is set. A real bot replaces this with its STT -> user aggregator -> LLM chain."""

    def __init__(self, greeting: str, *, hang_up: bool) -> None:
        super().__init__()
        self._greeting = greeting
        self._hang_up = hang_up

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        await self.push_frame(frame, direction)
        if isinstance(frame, CallStartedFrame):
            logger.info(f"call started: stream {frame.stream_sid}")
            await self.push_frame(TTSSpeakFrame(self._greeting))
            await self.push_frame(LLMRunFrame())
            if self._hang_up:
                # Queued behind the speech: the pipeline ends once everything before it has played.
                await self.push_frame(EndWorkerFrame(reason="script finished"))


def build_pipeline(
    transport: SingleClientWebsocketServerTransport,
    tts: NineninesixTTSService,
    *,
    hang_up: bool,
    greeting: str = GREETING,
    reply: str = REPLY,
) -> Pipeline:
    return Pipeline(
        [
            transport.input(),
            CallScript(greeting, hang_up=hang_up),  # <- your STT + context aggregator here
            ScriptedLLM([reply], token_delay_s=0.02),  # <- your LLM here
            tts,
            transport.output(),
        ]
    )


async def run_bot(
    *,
    host: str,
    port: int,
    base_url: str,
    api_key: str | None,
    voice: str | None,
    hang_up: bool,
    ready: asyncio.Event | None = None,
    greeting: str = GREETING,
    reply: str = REPLY,
) -> None:
    transport = SingleClientWebsocketServerTransport(
        params=SingleClientWebsocketServerParams(
            serializer=PlaybackAcks(TwilioStreamSerializer()),  # marks: what the caller heard, and when
            audio_in_enabled=True,
            audio_out_enabled=True,
            add_wav_header=False,
        ),
        host=host,
        port=port,
    )
    tts = NineninesixTTSService(
        api_key,
        base_url=base_url,
        encoding="pcm_mulaw",  # 8 kHz μ-law on the wire: half the bytes of PCM16
        settings=NineninesixTTSService.Settings(voice=voice) if voice else None,
    )

    @transport.event_handler("on_websocket_ready")
    async def _ready(_transport: Any) -> None:
        if ready is not None:
            ready.set()

    @transport.event_handler("on_client_disconnected")
    async def _gone(_transport: Any, _ws: Any) -> None:
        await worker.queue_frame(EndWorkerFrame(reason="caller hung up"))

    worker = PipelineWorker(
        build_pipeline(transport, tts, hang_up=hang_up, greeting=greeting, reply=reply),
        params=PipelineParams(audio_in_sample_rate=TWILIO_RATE, audio_out_sample_rate=TWILIO_RATE),
        cancel_on_idle_timeout=False,
    )
    runner = WorkerRunner(handle_sigint=ready is None)
    await runner.add_workers(worker)
    await runner.run()


async def fake_twilio_call(
    url: str, out_path: str, timeout_s: float = 60.0, *, jitter_buffer_s: float = 0.0
) -> dict[str, Any]:
    """Play Twilio's part: open the media stream, play the bot's μ-law audio in real time (behind
    ``jitter_buffer_s``), echo its marks once played, until the bot hangs up; write what was played."""
    from ttsbridge.emulator.carrier import CarrierConfig, EmulatedCarrier

    config = CarrierConfig(
        carrier="twilio", stream_id="MZemulator", call_id="CAemulator", jitter_buffer_s=jitter_buffer_s
    )
    async with EmulatedCarrier.dial(url, config) as call:
        await call.wait_until(lambda: call.hangup is not None, timeout_s)
    pcm = call.played_pcm()
    write_wav(out_path, pcm, TWILIO_RATE)
    assert call.hangup is not None
    return {
        "seconds": len(pcm) / 2 / TWILIO_RATE,
        "events": dict(call.events),
        "out": out_path,
        "unplayed_s": call.hangup.unplayed_s,
        "marks_echoed": sum(m.echoed_at is not None for m in call.marks),
        "errors": list(call.errors),
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def emulator_call(
    out_path: str,
    voice: str | None = None,
    *,
    greeting: str = GREETING,
    reply: str = REPLY,
    jitter_buffer_s: float = 0.0,
) -> dict[str, Any]:
    """The whole call on loopback: emulator + bot + a fake Twilio caller."""
    from ttsbridge.emulator import Emulator, EmulatorConfig

    async with Emulator(EmulatorConfig()) as emu:
        port = _free_port()
        ready = asyncio.Event()
        bot = asyncio.create_task(
            run_bot(
                host="127.0.0.1",
                port=port,
                base_url=emu.base_url,
                api_key=emu.api_key,
                voice=voice,
                hang_up=True,
                ready=ready,
                greeting=greeting,
                reply=reply,
            )
        )
        try:
            await asyncio.wait_for(ready.wait(), 30.0)
            result = await fake_twilio_call(
                f"ws://127.0.0.1:{port}", out_path, jitter_buffer_s=jitter_buffer_s
            )
            await asyncio.wait_for(bot, 30.0)
        finally:
            if not bot.done():
                bot.cancel()
        result["server_contexts"] = emu.stats.contexts_done
        formats = [m["output_format"] for _, m in emu.stats.messages if "output_format" in m]
        result["wire_formats"] = sorted({f"{f['encoding']}@{f['sample_rate']}" for f in formats})
        return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--emulator", action="store_true", help="run a whole call locally, no Twilio needed")
    parser.add_argument("--out", default="twilio-call.wav", help="(--emulator) WAV of what the caller heard")
    parser.add_argument(
        "--jitter-buffer", type=float, default=0.0, help="(--emulator) the carrier's jitter buffer, seconds"
    )
    parser.add_argument("--host", default="0.0.0.0", help="bot WebSocket host")
    parser.add_argument("--port", type=int, default=8765, help="bot WebSocket port")
    parser.add_argument("--base-url", default="https://api.nineninesix.ai", help="Nineninesix API base URL")
    parser.add_argument("--api-key", default=None, help="API key (default: $NINENINESIX_API_KEY)")
    parser.add_argument("--voice", default=None, help="voice id (default: the server's default voice)")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)

    logger.remove()
    logger.add(sys.stderr, level="DEBUG" if args.verbose else "WARNING")
    if args.emulator:
        result = asyncio.run(emulator_call(args.out, args.voice, jitter_buffer_s=args.jitter_buffer))
        print(f"caller heard {result['seconds']:.2f} s of audio -> {result['out']}")
        print(f"twilio events: {result['events']}; wire format: {', '.join(result['wire_formats'])}")
        print(
            f"marks echoed: {result['marks_echoed']}; left unplayed at the hang-up: {result['unplayed_s']:.2f} s"
        )
        return 0 if result["seconds"] > 0 else 1
    asyncio.run(
        run_bot(
            host=args.host,
            port=args.port,
            base_url=args.base_url,
            api_key=args.api_key,
            voice=args.voice,
            hang_up=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
