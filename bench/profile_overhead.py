"""Where a system's time goes in bench_overhead's scenarios: cProfile over its rounds, plus tasks per chunk.

One system (``--which ours`` or ``peer``) of one level runs ``--rounds`` rounds of a scenario (after a
warm-up) against the emulator in its own process, with this process's profiler on during the rounds only
and a counting task factory on the loop. Prints: chunks the server sent, CPU µs per chunk, asyncio tasks
created per chunk (by coroutine), this process's self time by area (JSON, base64, resampling, asyncio,
websocket reader, permessage-deflate, framework, ours; the loop's idle wait in epoll is left out), and the top functions by self time with calls per chunk.

    python bench/profile_overhead.py --level pipecat --scenario c4 [--which ours] [--rounds 10]
                                     [--top 25] [--dump /tmp/prof.pstats]

cProfile slows everything (about 2x here), so read shares and counts, not absolute times.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import LEVELS, SCENARIOS, batch, quiet_logs
from bench_peers import emulator_process

#: (area, substring of the function's file or name); first match wins, in order
AREAS: list[tuple[str, str]] = [
    ("(idle: waiting in epoll, not CPU)", "select.epoll"),
    ("websocket permessage-deflate (zlib)", "zlib"),
    ("websocket permessage-deflate (zlib)", "permessage_deflate"),
    ("json", "json/"),
    ("json", "orjson"),
    ("base64", "base64"),
    ("base64", "binascii"),
    ("resampling / G.711 (ttsbridge.audio)", "ttsbridge/audio/"),
    ("numpy", "numpy"),
    ("ours: nineninesix client/protocol", "ttsbridge/nineninesix/"),
    ("ours: turns.py", "ttsbridge/turns.py"),
    ("ours: pipecat adapter", "ttsbridge/pipecat/"),
    ("ours: livekit adapter", "ttsbridge/livekit/"),
    ("ours: livekit plugin", "livekit/plugins/nineninesix"),
    ("peer: cartesia plugin", "cartesia"),
    ("websockets library", "websockets/"),
    ("aiohttp (ws reader)", "aiohttp/"),
    ("pipecat framework", "pipecat/"),
    ("livekit framework", "livekit/"),
    ("asyncio machinery", "asyncio/"),
    ("asyncio machinery", "<method 'run' of '_contextvars"),
    ("socket / selector", "selectors"),
    ("socket / selector", "socket"),
]


class TaskCounter:
    """A loop task factory that counts the tasks created, by coroutine name."""

    def __init__(self) -> None:
        self.by_name: Counter[str] = Counter()

    def __call__(self, loop: asyncio.AbstractEventLoop, coro: Any, context: Any = None) -> asyncio.Task[Any]:
        self.by_name[getattr(coro, "__qualname__", type(coro).__name__)] += 1
        return asyncio.Task(coro, loop=loop, context=context)


def area_of(func: tuple[str, int, str]) -> str:
    where = f"{func[0]}:{func[2]}"
    for area, needle in AREAS:
        if needle in where:
            return area
    return "other"


def short(func: tuple[str, int, str]) -> str:
    path, line, name = func
    for marker in ("site-packages/", "/src/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{line}:{name}" if line else name


def summarize(prof: cProfile.Profile, chunks: int, cpu: float, tasks: TaskCounter, top: int) -> None:
    st = pstats.Stats(prof)
    entries: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
    # the profiler counts a builtin's wall time: epoll's is the loop waiting, kept out of the shares
    total = sum(v[2] for f, v in entries.items() if area_of(f) != AREAS[0][0]) or 1.0
    per = max(chunks, 1)
    print(
        f"chunks sent by the server: {chunks}; process CPU {cpu:.2f} s = {cpu / per * 1e6:.0f} µs per chunk"
    )
    n_tasks = sum(tasks.by_name.values())
    print(f"asyncio tasks created: {n_tasks} = {n_tasks / per:.2f} per chunk; by coroutine:")
    for name, n in tasks.by_name.most_common(8):
        print(f"  {n / per:6.2f} /chunk  {name}")
    areas: Counter[str] = Counter()
    for func, v in entries.items():
        areas[area_of(func)] += v[2]
    print("self time by area (share of profiled self time):")
    for area, t in areas.most_common():
        print(f"  {t / total * 100:5.1f} %  {area}")
    print(f"top {top} functions by self time (calls per chunk, self µs per chunk):")
    busy = [kv for kv in entries.items() if area_of(kv[0]) != AREAS[0][0]]
    ranked = sorted(busy, key=lambda kv: kv[1][2], reverse=True)[:top]
    for func, (_cc, nc, tt, _ct, _callers) in ranked:
        print(f"  {tt / total * 100:5.1f} %  {nc / per:7.2f} calls  {tt / per * 1e6:6.1f} µs  {short(func)}")


async def _until_first(s: Any, n: int, args: argparse.Namespace, prof: cProfile.Profile) -> float:
    """Profile each round from its start until ``--until-first`` % of its turns have their first audio out
    (the work that ran before the round's tail turn got its first audio: what a burst's p95 waits behind).
    Returns the CPU time of those windows."""
    import overhead_systems

    need = max(1, round(n * args.until_first / 100))
    cpu = 0.0
    on_frame = overhead_systems.Turn.on_frame
    state = {"firsts": 0, "c0": 0.0}

    def counting(self: Any, t: float, seconds: float) -> None:
        if self.t_first is None:
            state["firsts"] += 1
            if state["firsts"] == need:
                prof.disable()
                state["cpu"] = time.process_time() - state["c0"]
        on_frame(self, t, seconds)

    overhead_systems.Turn.on_frame = counting  # type: ignore[method-assign]
    try:
        for r in range(args.rounds):
            state.update(firsts=0, cpu=0.0, c0=time.process_time())
            prof.enable()
            await batch(s, n, r * 1000)
            prof.disable()
            cpu += state["cpu"]
    finally:
        overhead_systems.Turn.on_frame = on_frame  # type: ignore[method-assign]
    return cpu


async def run(args: argparse.Namespace) -> None:
    sc = SCENARIOS[args.scenario]
    async with emulator_process(args.first_chunk_latency, 1.0 if sc.paced else 0.0, 0.0, 0.0) as emu:
        s = LEVELS[args.level](args.which, emu, sc)
        await s.start(sc.streams)
        try:
            await batch(s, sc.streams, 8_000_000)
            await emu.times()
            loop = asyncio.get_running_loop()
            tasks, prof = TaskCounter(), cProfile.Profile()
            before = (await emu.stats())["chunks_sent"]
            loop.set_task_factory(tasks)
            c0 = time.process_time()
            if args.until_first:
                cpu = await _until_first(s, sc.streams, args, prof)
            else:
                prof.enable()
                for r in range(args.rounds):
                    await batch(s, sc.streams, r * 1000)
                prof.disable()
                cpu = time.process_time() - c0
            loop.set_task_factory(None)
            chunks = (await emu.stats())["chunks_sent"] - before
        finally:
            await s.stop()
    print(f"{args.level} / {args.which} / {args.scenario} ({sc.name}), {args.rounds} rounds, cProfile on")
    summarize(prof, chunks, cpu, tasks, args.top)
    if args.dump:
        prof.dump_stats(args.dump)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", default="pipecat", choices=list(LEVELS))
    ap.add_argument("--scenario", default="c4", choices=list(SCENARIOS))
    ap.add_argument("--which", default="ours", choices=["ours", "peer"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--first-chunk-latency", type=float, default=0.0)
    ap.add_argument("--dump", default="", help="write the pstats file here")
    ap.add_argument(
        "--until-first",
        type=float,
        default=0.0,
        help="profile each round only until this %% of its turns have their first audio out (e.g. 95: the "
        "work a burst's p95 turn waits behind); 0: the whole rounds",
    )
    ap.add_argument("--log-level", default="CRITICAL")
    a = ap.parse_args()
    quiet_logs(a.log_level)
    asyncio.run(run(a))
