"""The systems bench_overhead.py drives: N conversations of one client (ours or the framework's peer).

``PipecatStreams``: one pipeline ``stamp -> TTS -> probe`` per stream; ``LiveKitStreams``: one TTS instance
per stream, a turn is ``stream()`` + ``push_text`` + ``end_input``. ``turn(i, tag)`` runs one turn on stream
``i`` and returns when its text went in, when its first audio came out and how much audio it delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from dataclasses import dataclass
from typing import Any

from bench_peers import MODEL, EmulatorProcess

from ttsbridge.emulator import TONE_VOICE_ID, tone_duration

TURN_BOUND = 30.0  # one turn of one stream, end to end

#: Pipecat: a turn is over for the application once all of its audio has come out of the service (the tone
#: voice makes ``tone_duration(text)`` of it), and the next turn's text goes in at once: turns back to back,
#: as a bot that pushes two ``TTSSpeakFrame``s in a row or answers right after a greeting. The turn's
#: ``TTSStoppedFrame`` is recorded whenever it comes (``Turn.t_stop``): a stop frame that comes after the next
#: turn's text went in means the next turn's audio waited for it (Pipecat plays audio contexts in order).
#: False: wait for the ``TTSStoppedFrame`` before the next turn (the benches' method until issue 29, which hid
#: a late stop frame between turns, where no TTFA is measured).
END_ON_AUDIO = True
#: audio short of the expected length still taken as all of it (s): rounding of the last frame
AUDIO_SLACK_S = 0.001

#: Extra keyword arguments for "ours" (both levels), e.g. ``{"word_timestamps": False}`` (bench_overhead's
#: ``--ours-no-words``). The peers take none.
OURS_KWARGS: dict[str, Any] = {}


def now() -> float:
    return time.perf_counter()


#: The turn's text, formatted with its tag (bench_capacity.py sets a longer one for ~3.2 s turns).
TEXT = "Okay {tag}, I can help you with that."
#: A tag in the server's record: ``tq`` and seven lowercase letters (:func:`tag_word`).
TAG = re.compile(r"\btq([a-z]{7})\b")


def tag_word(tag: int) -> str:
    """``tag`` as a word of letters (``tq`` + 7 letters, base 26): a word the spoken-form normalizer leaves
    as it is (a digit tag is read out by ours and not by the peer, and is no longer found in the record)."""
    letters = []
    for _ in range(7):
        tag, r = divmod(tag, 26)
        letters.append(chr(ord("a") + r))
    return "tq" + "".join(reversed(letters))


def tag_of(word: str) -> int:
    """The tag of :func:`tag_word`'s seven letters (without ``tq``)."""
    n = 0
    for ch in word:
        n = n * 26 + ord(ch) - ord("a")
    return n


def text_of(tag: int) -> str:
    """The turn's text: a tag word (unique per turn, found again in the server's record), same length
    for every turn (about 2.3 s of tone audio with the default :data:`TEXT`)."""
    return TEXT.format(tag=tag_word(tag))


@dataclass
class Turn:
    tag: int
    t_text: float
    t_first: float | None = None
    audio_s: float = 0.0
    #: audio frames the application got
    frames: int = 0
    #: a real-time player that starts at the first frame: the longest it waited for a frame (s; 0 = no gap)
    late_s: float = 0.0
    #: when the last audio frame came out
    t_last: float | None = None
    #: when the turn's end came out (Pipecat: its ``TTSStoppedFrame``; LiveKit: the stream's iterator ended);
    #: None: not seen (yet)
    t_stop: float | None = None
    #: the audio context the turn's audio came in (Pipecat)
    context_id: str | None = None

    def on_frame(self, t: float, seconds: float) -> None:
        """One audio frame of ``seconds`` reached the application at ``t``."""
        if self.t_first is None:
            self.t_first = t
        else:
            late = t - self.t_first - self.audio_s  # when the player would have run out of audio
            if late > self.late_s:
                self.late_s = late
        self.t_last = t
        self.audio_s += seconds
        self.frames += 1


@dataclass
class Scenario:
    name: str
    streams: int
    rate: int
    encoding: str = "pcm_s16le"
    paced: bool = False
    #: the rate the peer runs at in the same rounds (it gets no audio at 24/48 kHz from a spec-exact server)
    peer_rate: int | None = None


class Streams:
    """N conversations of one system; ``turn(i, tag)`` runs one turn on stream ``i``."""

    bytes_per_sample = 2  # PCM16 frames; the peers label μ-law bytes as PCM16 (1 byte a sample)

    async def start(self, n: int) -> None: ...

    async def turn(self, i: int, tag: int) -> Turn: ...

    async def stop(self) -> None: ...


class PipecatStreams(Streams):
    def __init__(self, which: str, emu: EmulatorProcess, sc: Scenario) -> None:
        self.which, self.emu, self.sc = which, emu, sc
        self.bytes_per_sample = 1 if which == "peer" and sc.encoding == "pcm_mulaw" else 2
        self._streams: list[dict[str, Any]] = []

    def _tts(self) -> Any:
        from pipecat.services.cartesia.tts import CartesiaTTSService

        from ttsbridge.pipecat import NineninesixTTSService

        if self.which == "peer":
            return CartesiaTTSService(
                api_key=self.emu.api_key,
                url=self.emu.ws_url,
                encoding=self.sc.encoding,
                settings=CartesiaTTSService.Settings(voice=TONE_VOICE_ID, model=MODEL),
            )
        return NineninesixTTSService(
            self.emu.api_key,
            base_url=self.emu.base_url,
            encoding=self.sc.encoding,
            settings=NineninesixTTSService.Settings(voice=TONE_VOICE_ID),
            **OURS_KWARGS,
        )

    async def start(self, n: int) -> None:
        from pipecat.pipeline.pipeline import Pipeline
        from pipecat.pipeline.worker import PipelineParams, PipelineWorker
        from pipecat.workers.runner import WorkerRunner

        m = _pipecat_processors()
        for _ in range(n):
            stamp, probe = m["Stamp"](), m["Probe"]()
            worker = PipelineWorker(
                Pipeline([stamp, self._tts(), probe]),
                cancel_on_idle_timeout=False,
                idle_timeout_secs=None,
                enable_rtvi=False,
                params=PipelineParams(audio_out_sample_rate=self.sc.rate),
            )
            started = asyncio.Event()

            @worker.event_handler("on_pipeline_started")
            async def _started(_w: Any, _f: Any, started: asyncio.Event = started) -> None:
                started.set()

            runner = WorkerRunner(handle_sigint=False, check_dangling_tasks=False)
            await runner.add_workers(worker)
            task = asyncio.create_task(runner.run())
            self._streams.append({"stamp": stamp, "probe": probe, "worker": worker, "task": task})
            await asyncio.wait_for(started.wait(), TURN_BOUND)
        self._llm_turn = m["llm_turn"]

    async def turn(self, i: int, tag: int) -> Turn:
        s = self._streams[i]
        stamp, probe = s["stamp"], s["probe"]
        text = text_of(tag)
        t = Turn(tag, 0.0)
        expect = max(0.0, tone_duration(text) - AUDIO_SLACK_S) if END_ON_AUDIO else 0.0
        stamp.reset()
        probe.begin(t, expect, self.bytes_per_sample)
        await s["worker"].queue_frames(self._llm_turn(text))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(probe.done.wait(), TURN_BOUND)
        t.t_text = stamp.t or now()
        return t

    async def stop(self) -> None:
        from pipecat.frames.frames import EndFrame

        for s in self._streams:
            await s["worker"].queue_frame(EndFrame())
        for s in self._streams:
            try:
                await asyncio.wait_for(s["task"], 10)
            except (asyncio.TimeoutError, Exception):
                s["task"].cancel()


def _pipecat_processors() -> dict[str, Any]:
    from pipecat.frames.frames import (
        Frame,
        LLMFullResponseEndFrame,
        LLMFullResponseStartFrame,
        LLMTextFrame,
        TTSAudioRawFrame,
        TTSStoppedFrame,
    )
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor

    class Stamp(FrameProcessor):
        """Before the TTS: the time the turn's first text frame is pushed into it."""

        def __init__(self) -> None:
            super().__init__(enable_direct_mode=True)
            self.t: float | None = None

        def reset(self) -> None:
            self.t = None

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if isinstance(frame, LLMTextFrame) and self.t is None:
                self.t = now()
            await self.push_frame(frame, direction)

    class Probe(FrameProcessor):
        """After the TTS: the current turn's audio frames (``Turn.on_frame``); ``done`` once all of its audio
        came out (``begin``'s ``expect_s``; 0: at its ``TTSStoppedFrame``) or its ``TTSStoppedFrame`` came.
        A turn's ``TTSStoppedFrame`` is recorded in ``Turn.t_stop`` by its context id, also after the next
        turn has begun (a late stop frame)."""

        def __init__(self) -> None:
            super().__init__(enable_direct_mode=True)
            self.turn: Turn | None = None
            self.by_context: dict[str, Turn] = {}
            self.expect_s = 0.0
            self.bps = 2
            self.done = asyncio.Event()

        def begin(self, turn: Turn, expect_s: float, bytes_per_sample: int) -> None:
            self.turn, self.expect_s, self.bps = turn, expect_s, bytes_per_sample
            self.done = asyncio.Event()

        async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            turn = self.turn
            if isinstance(frame, TTSAudioRawFrame) and turn is not None:
                cid = frame.context_id
                if turn.context_id is None and cid is not None and cid not in self.by_context:
                    turn.context_id = cid
                    self.by_context[cid] = turn
                if cid is None or cid == turn.context_id:
                    turn.on_frame(now(), len(frame.audio) / self.bps / frame.sample_rate)
                    if self.expect_s and turn.audio_s >= self.expect_s:
                        self.done.set()
            elif isinstance(frame, TTSStoppedFrame):
                cid = frame.context_id
                of = self.by_context.pop(cid, None) if cid is not None else None
                if of is None and turn is not None and turn.context_id in (None, cid):
                    of = turn  # (also a turn with no audio: its stop frame ends it)
                if of is not None and of.t_stop is None:
                    of.t_stop = now()
                if of is turn:
                    self.done.set()
            await self.push_frame(frame, direction)

    def llm_turn(text: str) -> list[Frame]:
        """An LLM response streamed in 5-character tokens."""
        return [
            LLMFullResponseStartFrame(),
            *[LLMTextFrame(text[i : i + 5]) for i in range(0, len(text), 5)],
            LLMFullResponseEndFrame(),
        ]

    return {"Stamp": Stamp, "Probe": Probe, "llm_turn": llm_turn}


class LiveKitStreams(Streams):
    def __init__(self, which: str, emu: EmulatorProcess, sc: Scenario) -> None:
        self.which, self.emu, self.sc = which, emu, sc
        self.bytes_per_sample = 1 if which == "peer" and sc.encoding == "pcm_mulaw" else 2
        self._tts: list[Any] = []
        self._http: Any = None

    def make(self) -> Any:
        from livekit.plugins import cartesia, nineninesix

        if self.which == "peer":
            return cartesia.TTS(
                api_key=self.emu.api_key,
                base_url=self.emu.base_url,
                voice=TONE_VOICE_ID,
                model=MODEL,
                sample_rate=self.sc.rate,
                encoding=self.sc.encoding,  # type: ignore[arg-type]
                http_session=self._http,
            )
        return nineninesix.TTS(
            self.emu.api_key,
            base_url=self.emu.base_url,
            voice=TONE_VOICE_ID,
            sample_rate=self.sc.rate,
            encoding=self.sc.encoding,  # type: ignore[arg-type]
            http_session=self._http,
            **OURS_KWARGS,
        )

    async def start(self, n: int) -> None:
        import aiohttp
        from livekit.agents import APIConnectOptions

        self._conn = APIConnectOptions(max_retry=0, retry_interval=0.0, timeout=10.0)
        # No connection cap: aiohttp's default connector admits 100 connections (LiveKit's shared session 50
        # per host), and the peer's WebSockets come from this session, so above 100 streams its turns would
        # wait for a free connection slot: a capacity figure of the connector, not of the plugin.
        self._http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))
        self._tts = [self.make() for _ in range(n)]

    async def turn(self, i: int, tag: int) -> Turn:
        t = Turn(tag, now())
        with contextlib.suppress(Exception):
            async with self._tts[i].stream(conn_options=self._conn) as stream:
                stream.push_text(text_of(tag))
                stream.end_input()

                async def read() -> None:
                    async for ev in stream:
                        f = ev.frame
                        t.on_frame(now(), f.data.nbytes / self.bytes_per_sample / f.sample_rate)

                await asyncio.wait_for(read(), TURN_BOUND)
                t.t_stop = now()
        return t

    async def stop(self) -> None:
        for t in self._tts:
            with contextlib.suppress(Exception):
                await t.aclose()
        if self._http is not None:
            await self._http.close()


LEVELS: dict[str, type[Streams]] = {"pipecat": PipecatStreams, "livekit": LiveKitStreams}
