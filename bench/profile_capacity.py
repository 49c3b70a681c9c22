"""What one saturated level of bench_capacity.py spends its time on, and what wakes the loop per chunk.

Runs one level of one system (``bench_capacity.level``: fresh objects, warm-up, staggered starts, the rounds)
with counters on the event loop during the measured turns, then prints per server chunk (the emulator's
count): asyncio tasks created (by coroutine), callbacks scheduled with ``call_soon`` (by callback: a task
step, a future's done callbacks, a transport's reading), timers (``call_at``/``call_later``, by callback),
futures created, and log records made (``Logger.makeRecord``, and calls of the logging methods even when
their level is off). With ``--cprofile`` the self time by function too (cProfile roughly doubles the CPU:
read shares and counts); without it, run it under ``py-spy record -r 250 -f raw`` for an undisturbed
sampling profile and summarise that with ``--collapsed FILE``.

    python bench/profile_capacity.py --framework livekit --system ours --pace 2 --streams 60 [--cprofile]
    py-spy record -r 250 -f raw -o /tmp/lk.txt -- python bench/profile_capacity.py --framework livekit ...
    python bench/profile_capacity.py --collapsed /tmp/lk.txt [--top 40]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import logging
import pstats
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


_DIGITS = re.compile(r"[0-9a-f]{6,}|#?\d+")


def _name(cb: Any) -> str:
    inner = getattr(cb, "__func__", cb)
    owner = getattr(cb, "__self__", None)
    if owner is not None and type(owner).__name__ in ("Task", "_asyncio.Task"):
        coro = owner.get_coro()
        name = getattr(coro, "__qualname__", type(coro).__name__)
        if "run_coroutine" in name or name == "coroutine":  # Pipecat's TaskManager wrapper: the task's name
            name = f"{name} [{_DIGITS.sub('#', owner.get_name())}]"
        return f"Task step: {name}"
    return getattr(inner, "__qualname__", None) or type(cb).__name__


class LoopCounters:
    """Counts what is scheduled on the loop while installed."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.tasks: Counter[str] = Counter()
        self.soon: Counter[str] = Counter()
        self.timers: Counter[str] = Counter()
        self.futures = 0
        self.logs: Counter[str] = Counter()

    def install(self) -> None:
        loop, me = self.loop, self
        self._saved = (loop.call_soon, loop.call_at, loop.create_future, loop.get_task_factory())
        soon, call_at, create_future = self._saved[:3]

        def call_soon(cb: Any, *args: Any, context: Any = None) -> Any:
            me.soon[_name(cb)] += 1
            return soon(cb, *args, context=context)

        def call_at_(when: float, cb: Any, *args: Any, context: Any = None) -> Any:
            me.timers[_name(cb)] += 1
            return call_at(when, cb, *args, context=context)

        def create_future_() -> Any:
            me.futures += 1
            return create_future()

        def factory(lp: Any, coro: Any, context: Any = None) -> Any:
            me.tasks[getattr(coro, "__qualname__", type(coro).__name__)] += 1
            return asyncio.Task(coro, loop=lp, context=context)

        loop.call_soon = call_soon  # type: ignore[method-assign]
        loop.call_at = call_at_  # type: ignore[method-assign]
        loop.create_future = create_future_  # type: ignore[method-assign]
        loop.set_task_factory(factory)
        # logging calls, also those whose level is off (their arguments were built anyway)
        self._log_saved = {m: getattr(logging.Logger, m) for m in ("debug", "info", "warning", "makeRecord")}
        for m, real in self._log_saved.items():

            def wrap(self_: logging.Logger, *a: Any, _m: str = m, _real: Any = real, **k: Any) -> Any:
                me.logs[f"{_m} {self_.name}"] += 1
                return _real(self_, *a, **k)

            setattr(logging.Logger, m, wrap)

    def remove(self) -> None:
        loop = self.loop
        loop.call_soon, loop.call_at, loop.create_future = self._saved[:3]  # type: ignore[method-assign]
        loop.set_task_factory(self._saved[3])
        for m, real in self._log_saved.items():
            setattr(logging.Logger, m, real)

    def report(self, chunks: int) -> None:
        per = max(chunks, 1)

        def block(title: str, c: Counter[str], k: int = 10) -> None:
            print(f"{title}: {sum(c.values()) / per:.2f} per chunk")
            for name, n in c.most_common(k):
                print(f"  {n / per:6.2f}  {name}")

        block("tasks created", self.tasks)
        block("call_soon (task steps, future callbacks, transport events)", self.soon, 14)
        block("timers (call_at / call_later)", self.timers)
        print(f"futures created: {self.futures / per:.2f} per chunk")
        block("logging calls (Logger.debug/info/warning; makeRecord = records actually made)", self.logs)


async def run(args: argparse.Namespace) -> None:
    import bench_capacity
    from bench_overhead import quiet_logs
    from bench_peers import emulator_process

    quiet_logs(args.log_level)
    if args.ours_no_words:
        from overhead_systems import OURS_KWARGS

        OURS_KWARGS["word_timestamps"] = False
    loop = asyncio.get_running_loop()
    counters = LoopCounters(loop)
    prof = cProfile.Profile() if args.cprofile else None
    async with emulator_process(args.first_chunk_latency, args.pace, 0.0, 0.0) as emu:
        real_stats = emu.stats
        state: dict[str, Any] = {"calls": 0}

        async def stats() -> dict[str, Any]:
            # bench_capacity.level asks for stats right before and right after the measured turns
            out = await real_stats()
            state["calls"] += 1
            if state["calls"] == 1:
                state["chunks0"] = out["chunks_sent"]
                if not args.no_counters:
                    counters.install()
                if prof is not None:
                    prof.enable()
            elif state["calls"] == 2:
                if prof is not None:
                    prof.disable()
                if not args.no_counters:
                    counters.remove()
                state["chunks1"] = out["chunks_sent"]
            return out

        emu.stats = stats  # type: ignore[method-assign]
        lv = await bench_capacity.level(args.framework, args.system, emu, args.streams, args.pace, args)
    chunks = state.get("chunks1", 0) - state.get("chunks0", 0)
    print(bench_capacity.progress(lv))
    print(f"server chunks during the turns: {chunks} ({chunks / max(lv['turns'], 1):.0f} per turn)")
    counters.report(chunks)
    if prof is not None:
        from profile_overhead import short

        st = pstats.Stats(prof)
        entries: dict[Any, Any] = st.stats  # type: ignore[attr-defined]
        busy = {f: v for f, v in entries.items() if "epoll" not in f[2]}
        total = sum(v[2] for v in busy.values()) or 1.0
        print(f"top {args.top} by self time (cProfile on; calls per chunk, self µs per chunk):")
        for func, (_cc, nc, tt, _ct, _c) in sorted(busy.items(), key=lambda kv: -kv[1][2])[: args.top]:
            print(
                f"  {tt / total * 100:5.1f} %  {nc / max(chunks, 1):7.2f}  {tt / max(chunks, 1) * 1e6:6.1f} µs  {short(func)}"
            )
        if args.dump:
            prof.dump_stats(args.dump)


def collapsed(path: str, top: int) -> None:
    """Self and inclusive sample shares by function from py-spy's raw (collapsed stack) output; the loop's
    idle wait (``select``/``epoll``) is left out of the shares."""
    self_c: Counter[str] = Counter()
    areas: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    tasks: Counter[str] = Counter()
    total = idle = 0
    for line in Path(path).read_text().splitlines():
        stack, _, n_s = line.rpartition(" ")
        if not stack:
            continue
        n = int(n_s)
        frames = stack.split(";")
        leaf = frames[-1]
        if any(skip in stack for skip in _SKIP):  # other threads, imports: not the loop's work
            continue
        if "select (" in leaf and "selectors.py" in leaf:
            idle += n
            continue
        total += n
        self_c[_fn(leaf)] += n
        areas[_area(leaf)] += n
        for f in set(_fn(x) for x in frames):
            incl[f] += n
        tasks[_task(frames)] += n
    print(f"samples: {total} busy, {idle} idle in select ({idle / max(total + idle, 1) * 100:.0f} % idle)")
    print("self samples by area (share of busy):")
    for a, n in areas.most_common():
        print(f"  {n / total * 100:5.1f} %  {a}")
    print(f"top {top} by self samples (share of busy):")
    for f, n in self_c.most_common(top):
        print(f"  {n / total * 100:5.1f} %  {f}")
    print(f"top {top} by inclusive samples (share of busy):")
    for f, n in incl.most_common(top):
        print(f"  {n / total * 100:5.1f} %  {f}")
    print("samples by what the loop ran (the callback or task under Handle._run; Pipecat's task wrapper")
    print("looked through), absolute, to set beside another system's run of the same level:")
    for f, n in tasks.most_common(top):
        print(f"  {n:7d}  {f}")


def _task(frames: list[str]) -> str:
    """The callback the event loop ran for this sample: the frame under ``Handle._run`` (a task's coroutine,
    a transport's ``_read_ready``, a timer), looking through Pipecat's ``run_coroutine`` wrapper."""
    names = [_fn(x).rsplit(":", 1)[-1] for x in frames]
    try:
        i = names.index("Handle._run") + 1
    except ValueError:
        return "(outside a loop callback)"
    while i < len(names) - 1 and names[i].endswith("run_coroutine"):
        i += 1
    return names[i] if i < len(names) else "(the callback itself)"


_SKIP = ("_do_waitpid", "importlib._bootstrap", "Thread.run", "_bootstrap_inner")


def _area(frame: str) -> str:
    from profile_overhead import AREAS

    name, _, where = frame.partition(" (")
    where = f"{where.rstrip(')').rsplit(':', 1)[0]}:{name}"
    for area, needle in AREAS[1:]:
        if needle in where:
            return area
    return "other"


def _fn(frame: str) -> str:
    # py-spy raw frames look like "function (path/to/file.py:123)"
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    path = where.rsplit(":", 1)[0]
    for marker in ("site-packages/", "/src/", "python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{path}:{name}"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--framework", default="livekit", choices=["pipecat", "livekit"])
    ap.add_argument("--system", default="ours", choices=["ours", "peer", "floor"])
    ap.add_argument("--pace", type=float, default=2.0)
    ap.add_argument("--streams", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-chunk-latency", type=float, default=0.05)
    ap.add_argument("--max-p95-ms", type=float, default=50.0)
    ap.add_argument("--turn-slack", type=float, default=10.0)
    ap.add_argument("--cprofile", action="store_true")
    ap.add_argument("--no-counters", action="store_true", help="no loop counters (under py-spy)")
    ap.add_argument("--dump", default="")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--collapsed", default="", help="summarise a py-spy raw file and exit")
    ap.add_argument("--ours-no-words", action="store_true")
    ap.add_argument("--log-level", default="CRITICAL")
    a = ap.parse_args()
    if a.collapsed:
        collapsed(a.collapsed, a.top)
    else:
        asyncio.run(run(a))
