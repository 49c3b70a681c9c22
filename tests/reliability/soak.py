"""Soak: many turns on ONE long-lived object (a Pipecat pipeline, a LiveKit TTS, a turn provider) against the
loopback server, a share of them barged-in at a random audio frame. Counts stale samples and failed turns,
samples RSS, and checks sockets (server side, before close) and tasks (after close) against the baseline.
Importable without pytest (bench/chaos.py --soak N)."""

from __future__ import annotations

import asyncio
import gc
import os
import random
import weakref
from dataclasses import dataclass, field
from typing import Any

from harness import BOUND, FULL_TURN_BYTES, leaked_tasks, make_provider, turn_once, wait_sockets_closed
from pipecat.frames.frames import EndFrame
from surfaces import livekit_turn, make_livekit, pipecat_turns

from loopback import LoopbackServer

#: Nineninesix keeps one pooled connection open between turns; a Kitta session is one connection per turn,
#: closed when the turn ends (standby is off in these runs)
IDLE_SOCKETS = {"nineninesix": 1, "kitta": 0}


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def slope_per_1000(samples: list[tuple[int, int]]) -> float:
    """Least-squares slope of (turn, rss bytes), in MiB per 1,000 turns."""
    if len(samples) < 2:
        return 0.0
    n = len(samples)
    mx = sum(x for x, _ in samples) / n
    my = sum(y for _, y in samples) / n
    var = sum((x - mx) ** 2 for x, _ in samples)
    cov = sum((x - mx) * (y - my) for x, y in samples)
    return (cov / var) * 1000 / 2**20 if var else 0.0


@dataclass
class SoakReport:
    turns: int = 0
    barge_ins: int = 0
    stale: int = 0
    failed: list[str] = field(default_factory=list)
    rss: list[tuple[int, int]] = field(default_factory=list)
    sockets_after_turns: int = 0
    tasks_after_close: int = 0
    #: framework-free turn objects still alive (after gc) once every turn is over, before close
    turns_alive: int = 0
    #: Pipecat: frames the probe saw, and how many of them are still alive (after gc) when the EndFrame reaches
    #: it (the harness keeps none; what is alive is the last turn's and the frames in flight)
    frames_seen: int = 0
    frames_alive: int = 0

    @property
    def rss_slope(self) -> float:
        """MiB per 1,000 turns, leaving out the first 10 % of the samples (warm-up: lazy imports, caches)."""
        return slope_per_1000(self.rss[len(self.rss) // 10 :])


def plan(turns: int, barge_rate: float, seed: int) -> dict[int, int]:
    """Turn index -> audio frame at which it is barged-in (1..3)."""
    rng = random.Random(seed)
    return {i: rng.randint(1, 3) for i in range(turns) if rng.random() < barge_rate}


def account(report: SoakReport, i: int, out: Any, barged: bool) -> None:
    report.turns += 1
    report.stale += out.stale
    if out.kind != "audio" or (not barged and out.size < FULL_TURN_BYTES):
        report.failed.append(f"turn {i}: {out.kind} {out.size} bytes {out.error!r}")


async def soak(
    surface: str, provider: str, turns: int, *, barge_rate: float = 0.3, seed: int = 0, rss_every: int = 100
) -> SoakReport:
    report = SoakReport()
    barge = plan(turns, barge_rate, seed)
    report.barge_ins = len(barge)
    baseline = set(asyncio.all_tasks())
    async with LoopbackServer(provider) as srv:
        if surface == "pipecat":
            await _soak_pipecat(report, provider, srv, turns, barge, rss_every)
        else:
            await _soak_object(report, surface, provider, srv, turns, barge, rss_every)
        report.tasks_after_close = len(await leaked_tasks(baseline))
        await wait_sockets_closed(srv)
        report.sockets_after_turns = max(report.sockets_after_turns, srv.open_connections)
    return report


async def _soak_object(
    report: SoakReport, surface: str, provider: str, srv: LoopbackServer, turns: int,
    barge: dict[int, int], rss_every: int,
) -> None:  # fmt: skip
    obj = (
        make_livekit(provider, srv.base_url)
        if surface == "livekit"
        else make_provider(provider, srv.base_url)
    )
    refs: list[weakref.ref[Any]] = []
    try:
        for i in range(turns):
            if surface == "livekit":
                out = await livekit_turn(obj, i + 1, cancel_after=barge.get(i))
            else:
                out = await turn_once(obj, i + 1, cancel_after=barge.get(i), refs=refs)
            account(report, i, out, i in barge)
            if i % rss_every == 0:
                report.rss.append((i, rss_bytes()))
        await _idle_sockets(report, provider, srv)
        gc.collect()
        report.turns_alive = sum(1 for r in refs if r() is not None)
    finally:
        await asyncio.wait_for(obj.aclose(), BOUND)


async def _soak_pipecat(
    report: SoakReport, provider: str, srv: LoopbackServer, turns: int, barge: dict[int, int], rss_every: int
) -> None:
    """One pipeline for all turns; RSS is sampled by a side task while it runs."""

    async def sample() -> None:
        while True:
            report.rss.append((srv.turns, rss_bytes()))
            await asyncio.sleep(0.2)

    seen: list[weakref.ref[Any]] = []  # frames are unhashable dataclasses: no WeakSet

    def watch(frame: Any) -> None:
        report.frames_seen += 1
        seen.append(weakref.ref(frame))
        if len(seen) >= 2048:  # keep the list itself bounded: drop the refs of frames already gone
            seen[:] = [r for r in seen if r() is not None]
        if isinstance(frame, EndFrame):
            gc.collect()
            report.frames_alive = sum(1 for r in seen if r() is not None)

    sampler = asyncio.create_task(sample())
    try:
        outs = await pipecat_turns(provider, srv.base_url, list(range(1, turns + 1)), barge,
                                   timeout=BOUND * turns, retain=False, watch=watch)  # fmt: skip
    finally:
        sampler.cancel()
        await asyncio.gather(sampler, return_exceptions=True)
    for i, out in enumerate(outs):
        account(report, i, out, i in barge)


async def _idle_sockets(report: SoakReport, provider: str, srv: LoopbackServer) -> None:
    """Open server-side sockets once every turn is over (bounded wait for closes in flight)."""
    loop = asyncio.get_running_loop()
    end = loop.time() + 2.0
    while srv.open_connections > IDLE_SOCKETS[provider] and loop.time() < end:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    report.sockets_after_turns = srv.open_connections - IDLE_SOCKETS[provider]
