"""The framework's own floor for bench_overhead.py ``--floor``: a TTS plugin with no network and no provider.

Its audio is there the moment the first sentence is: on that sentence it hands the framework the turn's audio
(as long as the emulator's tone voice makes the text, in 40 ms chunks of silence at the stream's rate; the
first at once, then one chunk per loop iteration, as a socket's reads would bring them). Everything left in its
TTFA overhead is the framework's: the text path (Pipecat: the frames into the TTS, its sentence aggregation,
``run_tts``; LiveKit: ``stream()``, the input channel, the sentence tokenizer) and the audio path out (Pipecat:
the audio context and its task; LiveKit: the ``AudioEmitter``). No plugin that takes text through the
framework and returns audio through it can add less. ``floor / peer`` is therefore the least ``ours / peer``
any plugin could reach in the same run; CPU per audio second the same.

- Pipecat: a ``TTSService`` whose ``run_tts`` yields ``TTSAudioRawFrame`` s (the path of Pipecat's HTTP
  services: every frame through the turn's audio context).
- LiveKit: a streaming ``tts.TTS`` whose stream reads ``_input_ch`` into LiveKit's default sentence
  tokenizer (blingfire, as the peer and ours) and pushes into the ``AudioEmitter``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from typing import Any

from bench_peers import MODEL
from overhead_systems import TURN_BOUND, LiveKitStreams, PipecatStreams, Scenario, Streams, Turn, now, text_of

from ttsbridge.emulator import TONE_VOICE_ID, tone_duration

CHUNK_S = 0.04
#: 0: one chunk per loop iteration (as a burst's reads bring them); > 0: chunks paced at this multiple of real
#: time, the first at once (bench_capacity.py: the framework alone at the server's pace and frame size).
PACE = 0.0
#: the API's wire rates (docs/nineninesix.md)
WIRE_RATES = (8000, 16000, 22050)


async def next_chunk(i: int, t0: float) -> None:
    """Wait for chunk ``i`` (``i >= 1``) of a turn whose first chunk went out at loop time ``t0``."""
    if PACE <= 0:
        await asyncio.sleep(0)  # one chunk per loop iteration, as reads bring them
        return
    delay = t0 + i * CHUNK_S / PACE - asyncio.get_running_loop().time()
    await asyncio.sleep(max(0.0, delay))


def chunks_for(text: str, rate: int) -> tuple[bytes, int]:
    """One 40 ms chunk of silence at ``rate`` and how many make ``text`` (the tone voice's duration)."""
    n = max(1, round(tone_duration(text.strip()) / CHUNK_S))
    return bytes(2 * round(rate * CHUNK_S)), n


class PipecatFloor(PipecatStreams):
    def __init__(self, which: str, emu: Any, sc: Scenario) -> None:
        super().__init__(which, emu, sc)
        self.bytes_per_sample = 2

    def _tts(self) -> Any:
        from pipecat.frames.frames import TTSAudioRawFrame
        from pipecat.services.tts_service import TTSService

        class FloorTTSService(TTSService):
            def __init__(self) -> None:
                super().__init__(push_stop_frames=True)  # as Pipecat's HTTP services: stop once played

            def can_generate_metrics(self) -> bool:
                return False

            async def run_tts(self, text: str, context_id: str):  # type: ignore[no-untyped-def]
                chunk, n = chunks_for(text, self.sample_rate)
                t0 = asyncio.get_running_loop().time()
                for i in range(n):
                    if i:
                        await next_chunk(i, t0)
                    yield TTSAudioRawFrame(chunk, self.sample_rate, 1, context_id=context_id)

        return FloorTTSService()


class LiveKitFloor(LiveKitStreams):
    def __init__(self, which: str, emu: Any, sc: Scenario) -> None:
        super().__init__(which, emu, sc)
        self.bytes_per_sample = 2

    def make(self) -> Any:
        from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions, tokenize, tts, utils

        rate = self.sc.rate

        class FloorStream(tts.SynthesizeStream):
            async def _run(self, output_emitter: tts.AudioEmitter) -> None:
                output_emitter.initialize(
                    request_id=utils.shortuuid(),
                    sample_rate=rate,
                    num_channels=1,
                    mime_type="audio/pcm",
                    stream=True,
                )
                sentences = tokenize.blingfire.SentenceTokenizer().stream()

                async def input_task() -> None:
                    async for data in self._input_ch:
                        if isinstance(data, self._FlushSentinel):
                            sentences.flush()
                            continue
                        sentences.push_text(data)
                    sentences.end_input()

                task = asyncio.create_task(input_task())
                try:
                    output_emitter.start_segment(segment_id=utils.shortuuid())
                    async for ev in sentences:
                        self._mark_started()
                        chunk, n = chunks_for(ev.token, rate)
                        t0 = asyncio.get_running_loop().time()
                        for i in range(n):
                            if i:
                                await next_chunk(i, t0)
                            output_emitter.push(chunk)
                    output_emitter.end_segment()
                finally:
                    await sentences.aclose()
                    await utils.aio.gracefully_cancel(task)

        class FloorTTS(tts.TTS):
            def __init__(self) -> None:
                super().__init__(
                    capabilities=tts.TTSCapabilities(streaming=True), sample_rate=rate, num_channels=1
                )

            def synthesize(
                self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
            ) -> Any:
                raise NotImplementedError

            def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> FloorStream:
                return FloorStream(tts=self, conn_options=conn_options)

        return FloorTTS()


class RawStreams(Streams):
    """The network's floor: no framework, one aiohttp WebSocket per stream (its C frame reader) doing only
    what any plugin must: the turn's text in one generation request (the peer's fields), then read the
    chunks, JSON and base64 each, until ``done``. Its overhead is loopback transit both ways plus the
    server's own read and write latency, which the subtraction cannot take out, plus this minimal client."""

    def __init__(self, which: str, emu: Any, sc: Scenario) -> None:
        self.which, self.emu, self.sc = which, emu, sc
        self._ws: list[Any] = []
        self._http: Any = None

    async def start(self, n: int) -> None:
        import aiohttp

        self._http = aiohttp.ClientSession()
        url = f"{self.emu.ws_url}?cartesia_version=2025-04-16"
        headers = {"X-API-Key": self.emu.api_key}
        self._ws = [await self._http.ws_connect(url, headers=headers) for _ in range(n)]

    async def turn(self, i: int, tag: int) -> Turn:
        ws, text = self._ws[i], text_of(tag)
        rate = self.sc.rate if self.sc.rate in WIRE_RATES else 22050  # as ours asks for 24/48 kHz out
        t = Turn(tag, now())
        request = {
            "model_id": MODEL,
            "transcript": text + " ",
            "voice": {"mode": "id", "id": TONE_VOICE_ID},
            "output_format": {"container": "raw", "encoding": self.sc.encoding, "sample_rate": rate},
            "context_id": f"raw-{tag}",
            "continue": False,
        }
        await ws.send_str(json.dumps(request))
        while True:
            msg = await asyncio.wait_for(ws.receive(), TURN_BOUND)
            if not isinstance(msg.data, str):  # closed (or not a JSON frame): the turn ends with what it got
                return t
            data = json.loads(msg.data)
            if data.get("data"):
                pcm = base64.b64decode(data["data"])
                if t.t_first is None:
                    t.t_first = now()
                t.audio_s += len(pcm) / (1 if self.sc.encoding == "pcm_mulaw" else 2) / rate
            if data.get("done") or data.get("type") in ("done", "error"):
                return t

    async def stop(self) -> None:
        for ws in self._ws:
            with contextlib.suppress(Exception):
                await ws.close()
        if self._http is not None:
            await self._http.close()


FLOORS: dict[str, type[Any]] = {"pipecat": PipecatFloor, "livekit": LiveKitFloor}

__all__ = ["FLOORS", "LiveKitFloor", "PipecatFloor", "RawStreams", "chunks_for", "next_chunk"]
