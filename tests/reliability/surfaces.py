"""Two turns through a framework surface: Pipecat (one pipeline run, a speak frame per turn, the second sent
once the first stopped) or LiveKit (one TTS object, one ``stream()`` per turn). Returns one Outcome per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from harness import (
    BOUND,
    KITTA_CLIENT,
    KITTA_KEY,
    NNS_CLIENT,
    NNS_KEY,
    VOICE,
    CaseReport,
    Outcome,
    bounded,
    check_left,
    check_outcome,
    error_text,
    make_provider,
    rate_of,
    stale_samples,
    text_of,
    turn_once,
)
from pipecat.frames.frames import ControlFrame

from loopback import LoopbackServer


def make_livekit(
    provider: str, base_url: str, options: dict[str, Any] | None = None, *, standby: bool = False
) -> Any:
    """``options``: client options over the short ones of the suites (``NNS_CLIENT`` / ``KITTA_CLIENT``)."""
    if provider == "nineninesix":
        from livekit.plugins import nineninesix

        return nineninesix.TTS(NNS_KEY, base_url=base_url, voice=VOICE, sample_rate=rate_of(provider),
                               client_options={**NNS_CLIENT, **(options or {})})  # fmt: skip
    from livekit.plugins import kitta

    return kitta.TTS(KITTA_KEY, base_url=base_url, voice=VOICE, sample_rate=rate_of(provider), standby=standby,
                     client_options={**KITTA_CLIENT, **(options or {})})  # fmt: skip


async def livekit_turn(tts: Any, n: int, *, cancel_after: int | None = None, timeout: float = 5.0) -> Outcome:
    from livekit.agents import APIConnectOptions, APIError

    chunks: list[bytes] = []
    opts = APIConnectOptions(max_retry=0, retry_interval=0.0, timeout=timeout)

    async def run() -> None:
        async with tts.stream(conn_options=opts) as stream:
            stream.push_text(text_of(n))
            stream.end_input()
            async for ev in stream:
                chunks.append(ev.frame.data.tobytes())
                if cancel_after is not None and len(chunks) >= cancel_after:
                    return  # leaving the block closes the stream: LiveKit's barge-in

    return await bounded(run(), chunks, n, (APIError,))


def make_pipecat(
    provider: str, base_url: str, options: dict[str, Any] | None = None, *, standby: bool = False
) -> Any:
    if provider == "nineninesix":
        from ttsbridge.pipecat import NineninesixTTSService

        return NineninesixTTSService(NNS_KEY, base_url=base_url, sample_rate=rate_of(provider),
                                     settings=NineninesixTTSService.Settings(voice=VOICE),
                                     provider_options={**NNS_CLIENT, **(options or {})},
                                     stop_frame_timeout_s=60.0)  # fmt: skip
    from ttsbridge.pipecat import KittaTTSService

    return KittaTTSService(KITTA_KEY, base_url=base_url, sample_rate=rate_of(provider), standby=standby,
                           settings=KittaTTSService.Settings(voice=VOICE),
                           provider_options={**KITTA_CLIENT, **(options or {})},
                           stop_frame_timeout_s=60.0)  # fmt: skip


async def first_of(*events: asyncio.Event) -> None:
    """Wait (bounded) until one of ``events`` is set; the waiters of the others are cancelled."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        done, _pending = await asyncio.wait(waiters, timeout=BOUND, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            raise asyncio.TimeoutError("neither heard nor ended")
    finally:
        for w in waiters:
            w.cancel()


@dataclass
class BargeIn(ControlFrame):
    """Feeder instruction: once the turn in flight has ``after`` audio frames, interrupt it (a barge-in)."""

    after: int = 1


async def pipecat_turns(
    provider: str,
    base_url: str,
    numbers: list[int],
    barge: dict[int, int] | None = None,
    *,
    timeout: float | None = None,
    retain: bool = True,
    watch: Callable[[Any], None] | None = None,
    before: dict[int, Callable[[], Awaitable[None]]] | None = None,
    options: dict[str, Any] | None = None,
    standby: bool = False,
) -> list[Outcome]:
    """One pipeline run speaking ``text_of(n)`` for each n, each after the previous turn stopped; turns whose
    index is in ``barge`` are interrupted at their ``barge[index]``-th audio frame. Audio that reaches the end of the pipeline
    after the interruption passed it is stale. ``retain=False`` (soaks) keeps counts instead of the audio and
    passes on (down to run_test's sink, up to its source) only the frames that start and end the run: run_test
    keeps every frame it receives until the run ends. ``watch`` is called with every frame reaching the probe;
    ``before[i]`` is awaited before turn ``i`` starts (after turn ``i - 1`` ended): a fault between turns."""
    from pipecat.frames.frames import (
        CancelFrame,
        EndFrame,
        ErrorFrame,
        InterruptionFrame,
        StartFrame,
        StopFrame,
        TTSAudioRawFrame,
        TTSSpeakFrame,
        TTSStartedFrame,
        TTSStoppedFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.worker import PipelineParams
    from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
    from pipecat.tests.utils import run_test

    from ttsbridge.errors import TTSBridgeError

    audio: list[list[bytes]] = [[] for _ in numbers]
    errors: list[list[Any]] = [[] for _ in numbers]
    ended = [asyncio.Event() for _ in numbers]
    heard = [asyncio.Event() for _ in numbers]
    barge = barge or {}
    frames_heard = [0 for _ in numbers]
    sizes = [0 for _ in numbers]
    late = [0 for _ in numbers]
    ctx_turn: dict[str, int] = {}  # context id -> turn index, as first seen
    state = {"k": 0}  # speak frames let through so far; turn k-1 is in flight

    class Feeder(FrameProcessor):
        """Holds each speak frame until the previous turn stopped or failed; records errors (upstream)."""

        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            k = state["k"]
            if isinstance(frame, TTSSpeakFrame):
                if k > 0:
                    await asyncio.wait_for(ended[k - 1].wait(), BOUND)
                if before and k in before:
                    await before[k]()
                state["k"] = k + 1
            elif isinstance(frame, BargeIn):
                await first_of(heard[k - 1], ended[k - 1])
                await self.push_frame(InterruptionFrame(), direction)
                ended[k - 1].set()
                return
            elif isinstance(frame, ErrorFrame) and k > 0:
                # Pipecat reports a context that completed with no audio after its TTSStoppedFrame: the
                # context id in the text names the turn
                i = next((t for c, t in ctx_turn.items() if c in str(frame.error)), k - 1)
                errors[i].append(frame.exception if frame.exception is not None else frame.error)
                ended[i].set()
            if retain or direction is FrameDirection.DOWNSTREAM or isinstance(frame, RUN_FRAMES):
                await self.push_frame(frame, direction)

    class Probe(FrameProcessor):
        """Buckets audio per turn by context id (a new context belongs to the turn in flight); audio of a
        context that was playing when an interruption passed here is stale."""

        def __init__(self) -> None:
            super().__init__(enable_direct_mode=True)
            self.contexts = ctx_turn
            self.last: str | None = None
            self.interrupted: set[str] = set()

        async def process_frame(self, frame: Any, direction: FrameDirection) -> None:
            await super().process_frame(frame, direction)
            if watch is not None:
                watch(frame)
            k = state["k"]
            if isinstance(frame, InterruptionFrame) and self.last is not None:
                self.interrupted.add(self.last)
            if isinstance(frame, TTSStartedFrame) and frame.context_id:
                self.contexts.setdefault(str(frame.context_id), max(0, k - 1))
            if isinstance(frame, TTSAudioRawFrame):
                cid = self.last = str(frame.context_id)
                i = self.contexts.setdefault(cid, max(0, k - 1))
                if cid in self.interrupted:
                    late[i] += len(frame.audio) // 2
                frames_heard[i] += 1
                if frames_heard[i] >= barge.get(i, 1):
                    heard[i].set()
                if not retain:
                    sizes[i] += len(frame.audio)
                    late[i] += stale_samples(frame.audio, numbers[i])
                    return
                audio[i].append(frame.audio)
            if k > 0 and isinstance(frame, TTSStoppedFrame):
                ended[k - 1].set()
            if retain or isinstance(frame, RUN_FRAMES):
                await self.push_frame(frame, direction)

    # run_test's source and sink queue every frame they receive until the run ends (and the worker's observer
    # keeps a weak entry per live frame), so a soak passes on only the frames that start and end the run
    RUN_FRAMES = (StartFrame, EndFrame, StopFrame, CancelFrame)
    tts = make_pipecat(provider, base_url, options, standby=standby)
    frames: list[Any] = []
    for i, n in enumerate(numbers):
        frames += (
            [TTSSpeakFrame(text_of(n)), BargeIn(barge[i])] if i in barge else [TTSSpeakFrame(text_of(n))]
        )
    params = PipelineParams(audio_out_sample_rate=rate_of(provider))
    run = run_test(Pipeline([Feeder(), tts, Probe()]), frames_to_send=frames, pipeline_params=params,
                   start_timeout=10.0)  # fmt: skip
    try:
        await asyncio.wait_for(run, timeout or BOUND * len(numbers))
    except asyncio.TimeoutError:
        return [Outcome("hang") for _ in numbers]
    outs = [_pipecat_outcome(n, audio[k], errors[k], TTSBridgeError) for k, n in enumerate(numbers)]
    for out, extra, size in zip(outs, late, sizes, strict=True):
        out.stale += extra
        if not retain:
            out.nbytes = size
    return outs


def _pipecat_outcome(n: int, audio: list[bytes], errors: list[Any], typed: type[BaseException]) -> Outcome:
    pcm = b"".join(audio)
    raw = [e for e in errors if isinstance(e, BaseException) and not isinstance(e, typed)]
    if raw:
        return Outcome("raw", pcm, raw[0], stale_samples(pcm, n), error_text(raw[0]))
    if errors:
        err = errors[0]
        text = error_text(err) if isinstance(err, BaseException) else str(err)
        return Outcome(
            "typed", pcm, err if isinstance(err, BaseException) else None, stale_samples(pcm, n), text
        )
    return Outcome("audio", pcm, None, stale_samples(pcm, n))


async def two_turns(
    surface: str, provider: str, base_url: str, *, cancel_after: int | None = None
) -> list[Outcome]:
    """Turn 1 (maybe barged-in at its ``cancel_after``-th chunk), then a clean turn 2, on one long-lived
    provider / TTS object / pipeline, closed at the end."""
    if surface == "pipecat":
        return await pipecat_turns(provider, base_url, [1, 2], {0: cancel_after} if cancel_after else None)
    if surface == "livekit":
        tts = make_livekit(provider, base_url)
        try:
            return [await livekit_turn(tts, 1, cancel_after=cancel_after), await livekit_turn(tts, 2)]
        finally:
            await asyncio.wait_for(tts.aclose(), BOUND)
    prov = make_provider(provider, base_url)
    try:
        return [await turn_once(prov, 1, cancel_after=cancel_after), await turn_once(prov, 2)]
    finally:
        await asyncio.wait_for(prov.aclose(), BOUND)


async def run_case(
    surface: str,
    provider: str,
    arm: Callable[[LoopbackServer], None],
    *,
    cancel_after: int | None = None,
) -> CaseReport:
    """On a fresh loopback server: ``arm(server)``, a turn (the faulty one), a clean turn, close; then check
    both outcomes, the tasks and the server-side sockets left."""
    baseline = set(asyncio.all_tasks())
    async with LoopbackServer(provider) as srv:
        arm(srv)
        outs = await two_turns(surface, provider, srv.base_url, cancel_after=cancel_after)
        report = CaseReport(outs)
        check_outcome(report.problems, "faulty turn", outs[0])
        check_outcome(report.problems, "next turn", outs[1], full=True)
        await check_left(report.problems, baseline, srv)
    return report
