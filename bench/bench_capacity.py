"""Calls per core: the most concurrent streams each system carries at the pace real servers deliver.

For each framework (Pipecat: ``CartesiaTTSService`` vs ``ttsbridge.pipecat.NineninesixTTSService``; LiveKit:
``livekit.plugins.cartesia.TTS`` vs ``livekit.plugins.nineninesix.TTS``, as bench_overhead.py drives them) and
each server pace (``--paces``: 1 = real time, 2 = a server that renders twice as fast as playback), every
system runs **alone** (its own process, its own emulator process: ``bench_peers.py --child``, no relay,
zero added RTT, ``--first-chunk-latency`` to the first chunk, audio paced at the given multiple of real
time) through a ladder of stream counts, ascending, until the first level that fails. At each level:

- fresh objects: one pipeline (Pipecat) or TTS instance (LiveKit) per stream, as an app holds one per call,
  each warmed with one short turn (its connection), then ``gc.freeze()`` of what is alive;
- staggered starts: stream ``i`` starts its first turn ``i / n`` of a turn's length after stream 0, then
  runs ``--rounds`` turns back to back (about 3.2 s of audio each, one sentence tagged so the server's
  record of each turn is found again);
- **pass** = every turn completes with audio (at least 90 % of the turn's audio, within the turn bound)
  and the p95 of the TTFA overhead is at most ``--max-p95-ms`` (50 ms). TTFA overhead = (first audio out -
  text in) - (server first chunk - server first request), as in bench_overhead.py;
- CPU per audio second = this process's CPU time (``time.process_time``) over the level's turns / audio
  seconds delivered. Also printed: the p95 of each leg, the loop's lag (a 20 ms ticker's lateness), the
  longest wait a real-time player starting at a turn's first frame would have had (``gap``), audio frames
  per turn, and the server's own CPU share (is the emulator the limit?).

``floor`` is the framework alone at the same pace and frame size (``floor_systems.py`` with ``PACE``: a plugin
with no network, 40 ms frames paced like the server's chunks): when it fails at a level, the framework's own
per-frame cost binds there, whatever the plugin does. ``raw`` (optional) is a bare aiohttp client.

    python bench/bench_capacity.py                      # the full search, both frameworks, 1x and 2x
    python bench/bench_capacity.py --quick              # a coarser ladder and 2 rounds (~6 min)
    python bench/bench_capacity.py --frameworks livekit --paces 2 --systems ours,peer
    python bench/bench_capacity.py --plot-only /tmp/capacity.json --png docs/capacity.png

Prints one line per level as it goes (stderr), then a table and ``capacity ours/peer`` per framework and
pace; ``--json`` keeps every level's figures, ``--png`` draws p95 overhead against streams. No assertions
about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overhead import pct

HERE = Path(__file__).resolve()
nan = float("nan")

#: ~3.2 s of the emulator's tone voice (60 ms per character), one sentence, a 7-digit tag per turn.
TURN_TEXT = "Okay {tag}, I can help you with all of that today."
WARM_TEXT = "Hi {tag}."
LADDER = (25, 50, 75, 100, 125, 150, 175, 200, 250, 300)
QUICK_LADDER = (50, 100, 150, 200, 250)
SYSTEMS = ("peer", "ours", "floor")
#: the server's chunk (ms): a gap longer than one at a passed level is flagged in the gap table
GAP_BOUND_MS = 40.0


# -------------------------------------------------------------------------------------------------------------
# the child: one system's search (levels ascending until the first failure), one JSON line per level


class LagProbe:
    """A 20 ms ticker: how late the loop runs a timer (the loop's lag, as every stream's next hop sees it);
    and the garbage collector's pauses meanwhile (``gc.callbacks``), by generation."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self.gc_ms: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._gc_t0 = 0.0

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self.gc_ms[info["generation"]].append((time.perf_counter() - self._gc_t0) * 1000)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + 0.02
            await asyncio.sleep(0.02)
            self.lags.append((loop.time() - due) * 1000)

    def __enter__(self) -> LagProbe:
        self._task = asyncio.get_running_loop().create_task(self._run())
        gc.callbacks.append(self._on_gc)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on_gc)
        if self._task is not None:
            self._task.cancel()


async def level(framework: str, which: str, emu: Any, n: int, pace: float, args: argparse.Namespace) -> dict:
    import floor_systems
    import overhead_systems
    from bench_overhead import Result, overheads, system
    from overhead_systems import Scenario, tag_word

    from ttsbridge.emulator import tone_duration

    turn_audio = tone_duration(TURN_TEXT.format(tag=tag_word(0)))
    turn_s = turn_audio / pace
    overhead_systems.TURN_BOUND = turn_s + args.turn_slack
    floor_systems.PACE = pace
    sc = Scenario(f"{n} streams at {pace:g}x", n, 16000, paced=True)
    s = system(framework, which, emu, sc)
    t0 = time.perf_counter()
    try:
        await asyncio.wait_for(s.start(n), 60 + n)
        overhead_systems.TEXT = WARM_TEXT
        await asyncio.gather(*(s.turn(i, 9_000_000 + i) for i in range(n)))
        overhead_systems.TEXT = TURN_TEXT
        await emu.times()
        gc.collect()
        gc.freeze()
        stats0 = await emu.stats()
        w0, c0 = time.perf_counter(), time.process_time()

        async def stream(i: int) -> list[Any]:
            await asyncio.sleep(i * turn_s / n)  # staggered: starts spread over one turn's length
            # back to back: the next turn's text goes in once the last one's audio is all out
            # (overhead_systems.END_ON_AUDIO), not once its stop frame came
            return [await s.turn(i, (r * 1000 + i) + 1_000_000) for r in range(args.rounds)]

        with LagProbe() as lag:
            per_stream = await asyncio.gather(*(stream(i) for i in range(n)))
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        turns = [t for ts in per_stream for t in ts]
        await settle_stops([ts[-1] for ts in per_stream if ts])
        stats1 = await emu.stats()
        times = await emu.times()
        floor = which == "floor"
        res, first, following = Result(), Result(), Result()
        overheads(turns, times, res, floor=floor)
        overheads([ts[0] for ts in per_stream if ts], times, first, floor=floor)
        overheads([t for ts in per_stream for t in ts[1:]], times, following, floor=floor)
    finally:
        gc.unfreeze()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(s.stop(), 20)
    complete = sum(1 for t in turns if t.t_first is not None and t.audio_s >= 0.9 * turn_audio)
    p95 = pct(res.overhead_ms, 95)
    fails = []
    if complete < len(turns):
        fails.append(f"{len(turns) - complete} of {len(turns)} turns incomplete")
    if res.unmatched:
        fails.append(f"{res.unmatched} unmatched")
    if not p95 <= args.max_p95_ms:
        fails.append(f"p95 {p95:.1f} ms")
    server_cpu = stats1.get("cpu_s", 0.0) - stats0.get("cpu_s", 0.0)
    return {
        "framework": framework,
        "system": which,
        "pace": pace,
        "streams": n,
        "pass": not fails,
        "why": "; ".join(fails),
        "turns": len(turns),
        "complete": complete,
        "p50_ms": pct(res.overhead_ms, 50),
        "p95_ms": p95,
        "p99_ms": pct(res.overhead_ms, 99),
        "out_p95_ms": pct(res.out_ms, 95),
        "in_p95_ms": pct(res.in_ms, 95),
        "cpu_per_audio_s": cpu / res.audio_s if res.audio_s else float("nan"),
        "cpu_share": cpu / wall if wall else float("nan"),
        "server_cpu_share": server_cpu / wall if wall else float("nan"),
        "lag_p95_ms": pct(lag.lags, 95),
        "lag_max_ms": max(lag.lags, default=float("nan")),
        "gc": {g: [len(v), round(sum(v), 1), round(max(v, default=0.0), 1)] for g, v in lag.gc_ms.items()},
        # the first audio of a stream's first turn (after a pause) and of a turn that follows another
        "first_p95_ms": pct(first.overhead_ms, 95),
        "next_p50_ms": pct(following.overhead_ms, 50),
        "next_p95_ms": pct(following.overhead_ms, 95),
        **stop_figures(per_stream),
        "gap_p95_ms": pct([t.late_s * 1000 for t in turns if t.t_first is not None], 95),
        "gap_max_ms": max([t.late_s * 1000 for t in turns if t.t_first is not None], default=float("nan")),
        "frames_per_turn": statistics.mean([t.frames for t in turns]) if turns else float("nan"),
        "wall_s": time.perf_counter() - t0,
    }


async def settle_stops(last: list[Any], bound_s: float = 2.0) -> None:
    """Give the streams' last turns up to ``bound_s`` for their end (stop frame) to come out (a bounded poll:
    only the figures of :func:`stop_figures` need it)."""
    deadline = time.perf_counter() + bound_s
    # (a poll: the probe records a time, it has no event to await)
    while any(t.t_stop is None and t.t_first is not None for t in last):
        if time.perf_counter() > deadline:
            return
        await asyncio.sleep(0.02)


def stop_figures(per_stream: list[list[Any]]) -> dict[str, float]:
    """A turn's end (Pipecat: its ``TTSStoppedFrame``; LiveKit: the stream's end) within the turn's window,
    per turn that another follows on the same stream (the window ends when the next turn's text goes in: an
    end later than that held the next turn's audio back, since Pipecat plays audio contexts in order); and
    how long after the turn's last audio frame its end came (p95, max, ms)."""
    pairs = [(a, b) for ts in per_stream for a, b in itertools.pairwise(ts)]
    within = sum(1 for a, b in pairs if a.t_stop is not None and a.t_stop <= b.t_text)
    lags = [(t.t_stop - t.t_last) * 1000 for ts in per_stream for t in ts if t.t_stop and t.t_last]
    return {
        "stops_in_window": within / len(pairs) if pairs else float("nan"),
        "stop_lag_p95_ms": pct(lags, 95),
        "stop_lag_max_ms": max(lags, default=float("nan")),
    }


def ladder(args: argparse.Namespace) -> Iterator[int]:
    """``--ladder``, then on by ``--step`` until ``--max-streams``: the search goes on to the first failure."""
    levels = [int(x) for x in args.ladder.split(",")]
    yield from levels
    n = levels[-1]
    while args.step > 0 and n + args.step <= args.max_streams:
        n += args.step
        yield n


async def child(args: argparse.Namespace) -> None:
    from bench_overhead import quiet_logs
    from bench_peers import emulator_process

    quiet_logs(args.log_level)
    if args.ours_no_words:
        from overhead_systems import OURS_KWARGS

        OURS_KWARGS["word_timestamps"] = False
    framework, which, pace = args.child[0], args.child[1], float(args.child[2])
    async with emulator_process(args.first_chunk_latency, pace, 0.0, 0.0) as emu:
        for n in ladder(args):
            if n > args.max_streams:
                break
            out = await level(framework, which, emu, n, pace, args)
            print(json.dumps(out), flush=True)
            if not out["pass"]:
                break


# -------------------------------------------------------------------------------------------------------------
# the parent: one child process per (framework, pace, system), then the table and the picture


def run_search(framework: str, which: str, pace: float, args: argparse.Namespace) -> list[dict]:
    cmd = [sys.executable, str(HERE), "--child", framework, which, f"{pace:g}"]
    for flag in ("ladder", "step", "rounds", "first_chunk_latency", "max_p95_ms", "turn_slack", "log_level"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    cmd += ["--max-streams", str(args.max_streams)]
    if args.ours_no_words:
        cmd.append("--ours-no-words")
    levels: list[dict] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy()) as proc:
        deadline = time.monotonic() + args.search_budget_s
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if not line.startswith("{"):
                    continue
                lv = json.loads(line)
                levels.append(lv)
                print(progress(lv), file=sys.stderr, flush=True)
                if time.monotonic() > deadline:
                    print(f"  (search budget {args.search_budget_s:.0f} s spent: stopped)", file=sys.stderr)
                    proc.kill()
                    break
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
            if proc.poll() is None:
                proc.kill()
    return levels


def progress(lv: dict) -> str:
    return (
        f"  {lv['framework']:<7} {lv['system']:<5} {lv['pace']:g}x {lv['streams']:>4} streams: "
        f"{'pass' if lv['pass'] else 'FAIL'}  p50 {lv['p50_ms']:6.1f}  p95 {lv['p95_ms']:6.1f} ms "
        f"(legs p95 out {lv['out_p95_ms']:.1f} / in {lv['in_p95_ms']:.1f})  CPU {lv['cpu_per_audio_s']:.4f} s/s "
        f"= {lv['cpu_share'] * 100:.0f} % of a core (server {lv['server_cpu_share'] * 100:.0f} %)  "
        f"lag p95 {lv['lag_p95_ms']:.1f} max {lv.get('lag_max_ms', float('nan')):.0f}  "
        f"gc2 {_gc2(lv)}  gap p95 {lv['gap_p95_ms']:.1f} max {lv.get('gap_max_ms', float('nan')):.1f}  "
        f"{lv['frames_per_turn']:.0f} frames/turn  back to back: p95 first {lv.get('first_p95_ms', nan):.1f} / "
        f"following {lv.get('next_p95_ms', nan):.1f} ms, ends in window {lv.get('stops_in_window', nan):.2f}, "
        f"end lag p95 {lv.get('stop_lag_p95_ms', nan):.1f} max {lv.get('stop_lag_max_ms', nan):.0f} ms  "
        f"[{lv['wall_s']:.0f} s]{'  ' + lv['why'] if lv['why'] else ''}"
    )


def _gc2(lv: dict) -> str:
    """Full collections during the level: count / longest pause (ms)."""
    n, _total, longest = (lv.get("gc") or {}).get("2", (lv.get("gc") or {}).get(2, [0, 0, 0]))
    return f"{n}/{longest:.0f}ms"


def capacity(levels: list[dict]) -> int:
    """The largest level passed before the first failure (0: the first level failed)."""
    best = 0
    for lv in levels:
        if not lv["pass"]:
            break
        best = lv["streams"]
    return best


def first_fail(levels: list[dict]) -> dict | None:
    return next((lv for lv in levels if not lv["pass"]), None)


def describe(levels: list[dict]) -> str:
    cap = capacity(levels)
    bad = first_fail(levels)
    if bad is None:
        return f"{cap} (all passed)" if levels else "-"
    return f"{cap} ({bad['streams']}: {bad['why']})"


def at(levels: list[dict], n: int) -> dict | None:
    return next((lv for lv in levels if lv["streams"] == n), None)


def report(results: dict[str, list[dict]], args: argparse.Namespace) -> None:
    def get(fw: str, which: str, pace: float) -> list[dict]:
        return results.get(f"{fw}/{which}/{pace:g}", [])

    print(
        f"capacity = most concurrent streams (one object per stream, staggered, {args.rounds} rounds of "
        f"~3.2 s turns) with every turn complete and p95 TTFA overhead <= {args.max_p95_ms:g} ms; "
        f"first chunk {args.first_chunk_latency * 1000:.0f} ms (subtracted)"
    )
    for fw in args.frameworks.split(","):
        for pace in [float(p) for p in args.paces.split(",")]:
            print(f"\n{fw} at {pace:g}x real time")
            for which in args.systems.split(","):
                print(f"  {which:<5} capacity {describe(get(fw, which, pace))}")
            o, p = get(fw, "ours", pace), get(fw, "peer", pace)
            if o and p:
                co, cp = capacity(o), capacity(p)
                ratio = f"{co / cp:.2f}" if cp else "n/a"
                print(f"  capacity ours/peer {co}/{cp} = {ratio}")
                # CPU per audio second and p95 at every level both passed (and the lowest level)
                rows = []
                for lv in o:
                    q = at(p, lv["streams"])
                    if q is None:
                        continue
                    rows.append(
                        f"    {lv['streams']:>4} streams: CPU ours/peer {lv['cpu_per_audio_s']:.4f}/"
                        f"{q['cpu_per_audio_s']:.4f} = {lv['cpu_per_audio_s'] / q['cpu_per_audio_s']:.2f}; "
                        f"p95 {lv['p95_ms']:.1f}/{q['p95_ms']:.1f} ms; p50 {lv['p50_ms']:.1f}/{q['p50_ms']:.1f}; "
                        f"following turns p95 {lv.get('next_p95_ms', nan):.1f}/{q.get('next_p95_ms', nan):.1f}; "
                        f"ends in window {lv.get('stops_in_window', nan):.2f}/{q.get('stops_in_window', nan):.2f}; "
                        f"gap p95 {lv['gap_p95_ms']:.1f}/{q['gap_p95_ms']:.1f} max "
                        f"{lv.get('gap_max_ms', nan):.1f}/{q.get('gap_max_ms', nan):.1f} ms"
                    )
                print("\n".join(rows))
    print()
    print(markdown(results, args))
    print("\nper level (ms; CPU s per audio s):")
    for _key, levels in results.items():
        for lv in levels:
            print(progress(lv))


def _ratio(a: float, b: float, digits: int = 2) -> str:
    return f"{a / b:.{digits}f}" if a == a and b == b and b > 0 else "n/a"


def _fail(levels: list[dict]) -> str:
    bad = first_fail(levels)
    if bad is None:
        return f"none up to {levels[-1]['streams']}" if levels else "-"
    return f"{bad['streams']} ({bad['why']})"


def markdown(results: dict[str, list[dict]], args: argparse.Namespace) -> str:
    """The run's figures as docs/benchmarks.md tables: one table per figure, ours, the peer and the ratio."""

    def get(fw: str, which: str, pace: float) -> list[dict]:
        return results.get(f"{fw}/{which}/{pace:g}", [])

    fws = [f for f in args.frameworks.split(",") if f]
    paces = [float(p) for p in args.paces.split(",")]
    out = [
        "| capacity | peer: highest passed | peer: first failed | ours: highest passed | ours: first failed "
        "| ours/peer |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for fw in fws:
        for pace in paces:
            o, p = get(fw, "ours", pace), get(fw, "peer", pace)
            out.append(
                f"| {fw} {pace:g}x | {capacity(p)} | {_fail(p)} | {capacity(o)} | {_fail(o)} "
                f"| **{_ratio(capacity(o), capacity(p))}** |"
            )
    figures = [
        ("TTFA overhead p95, turns that follow another (ms)", "next_p95_ms", ".1f"),
        ("TTFA overhead p95, a stream's first turn (ms)", "first_p95_ms", ".1f"),
        (
            "turn ends (TTSStoppedFrame / stream end) within the turn's window, per turn",
            "stops_in_window",
            ".2f",
        ),
        ("CPU s per audio s", "cpu_per_audio_s", ".4f"),
        ("inter-frame gap p95 (ms)", "gap_p95_ms", ".1f"),
        ("inter-frame gap max (ms)", "gap_max_ms", ".1f"),
    ]
    for title, key, spec in figures:
        out += ["", f"| {title} | streams | peer | ours | ours/peer |", "| --- | --- | --- | --- | --- |"]
        for fw in fws:
            for pace in paces:
                o, p = get(fw, "ours", pace), get(fw, "peer", pace)
                for lv in o:
                    q = at(p, lv["streams"])
                    if q is None:
                        continue
                    a, b = lv.get(key, nan), q.get(key, nan)
                    mark = "" if lv["pass"] and q["pass"] else " (a failed level)"
                    if key == "gap_max_ms" and lv["pass"] and a > GAP_BOUND_MS:
                        mark += f" (ours' gap > {GAP_BOUND_MS:g} ms at a passed level)"
                    out.append(
                        f"| {fw} {pace:g}x | {lv['streams']}{mark} | {b:{spec}} | {a:{spec}} | {_ratio(a, b)} |"
                    )
    return "\n".join(out)


def plot(results: dict[str, list[dict]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paces = sorted({lv["pace"] for levels in results.values() for lv in levels})
    fig, axes = plt.subplots(1, len(paces), figsize=(6.2 * len(paces), 4.6), squeeze=False, sharey=True)
    style = {
        ("pipecat", "peer"): ("tab:blue", "--", "o"),
        ("pipecat", "ours"): ("tab:blue", "-", "o"),
        ("pipecat", "floor"): ("tab:blue", ":", "."),
        ("livekit", "peer"): ("tab:orange", "--", "s"),
        ("livekit", "ours"): ("tab:orange", "-", "s"),
        ("livekit", "floor"): ("tab:orange", ":", "."),
        ("pipecat", "raw"): ("grey", ":", "x"),
        ("livekit", "raw"): ("grey", ":", "x"),
    }
    names = {
        "peer": "peer (Cartesia plugin)",
        "ours": "ours",
        "floor": "framework alone",
        "raw": "bare aiohttp",
    }
    for ax, pace in zip(axes[0], paces, strict=False):
        for key, levels in results.items():
            fw, which, _p = key.split("/")
            pts = [lv for lv in levels if lv["pace"] == pace]
            if not pts:
                continue
            color, ls, marker = style.get((fw, which), ("black", "-", "."))
            xs = [lv["streams"] for lv in pts]
            ys = [min(lv["p95_ms"], 400) if lv["p95_ms"] == lv["p95_ms"] else 400 for lv in pts]
            ax.plot(xs, ys, ls, color=color, marker=marker, label=f"{fw} {names.get(which, which)}")
            for lv, y in zip(pts, ys, strict=False):
                if not lv["pass"]:
                    ax.plot([lv["streams"]], [y], marker="x", color="red", markersize=10, zorder=5)
        ax.axhline(50, color="red", linewidth=0.8, alpha=0.6)
        ax.set_yscale("log")
        ax.set_ylim(1, 450)
        ax.set_xlabel("concurrent streams (one object each)")
        ax.set_title(f"server paced at {pace:g}x real time")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("p95 TTFA overhead (ms, log; red line: 50 ms pass bound)")
    axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.suptitle(title + "  (red x: the level that failed)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(args: argparse.Namespace) -> None:
    if args.plot_only:
        data = json.loads(Path(args.plot_only).read_text())
        results = data["results"]
        args.rounds, args.max_p95_ms, args.first_chunk_latency = (
            data["rounds"],
            data["max_p95_ms"],
            data["fcl"],
        )
        report(results, args)
        if args.png:
            plot(results, args.png, data.get("title", ""))
        return
    t0 = time.perf_counter()
    results: dict[str, list[dict]] = {}
    for fw in args.frameworks.split(","):
        for pace in [float(p) for p in args.paces.split(",")]:
            for which in args.systems.split(","):
                print(f"[{fw} {which} at {pace:g}x]", file=sys.stderr, flush=True)
                results[f"{fw}/{which}/{pace:g}"] = run_search(fw, which, pace, args)
    total = time.perf_counter() - t0
    report(results, args)
    print(f"\n(total {total:.0f} s)")
    title = f"bench_capacity.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} rounds"
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "results": results,
                    "rounds": args.rounds,
                    "max_p95_ms": args.max_p95_ms,
                    "fcl": args.first_chunk_latency,
                    "title": title,
                    "argv": sys.argv[1:],
                },
                indent=1,
            )
        )
    if args.png:
        plot(results, args.png, title)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frameworks", default="pipecat,livekit")
    ap.add_argument("--paces", default="1,2", help="server pace, multiples of real time")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma list of peer, ours, floor, raw")
    ap.add_argument("--ladder", default=",".join(map(str, LADDER)), help="stream counts, ascending")
    ap.add_argument("--step", type=int, default=50, help="after --ladder, go on by this until a level fails")
    ap.add_argument("--max-streams", type=int, default=1000, help="stop the ladder above this")
    ap.add_argument("--rounds", type=int, default=3, help="turns per stream per level")
    ap.add_argument("--first-chunk-latency", type=float, default=0.05)
    ap.add_argument("--max-p95-ms", type=float, default=50.0)
    ap.add_argument("--turn-slack", type=float, default=10.0, help="turn bound = turn length + this (s)")
    ap.add_argument("--search-budget-s", type=float, default=900.0, help="one system's search, at most")
    ap.add_argument("--quick", action="store_true", help=f"ladder {QUICK_LADDER}, 2 rounds")
    ap.add_argument("--ours-no-words", action="store_true", help="ours with word_timestamps=False")
    ap.add_argument("--json", default="", help="write every level's figures here")
    ap.add_argument("--png", default="", help="draw p95 overhead against streams here (matplotlib)")
    ap.add_argument("--plot-only", default="", help="redraw / reprint from a --json file")
    ap.add_argument("--log-level", default="CRITICAL")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.quick:
        a.ladder = ",".join(map(str, QUICK_LADDER))
        a.rounds = min(a.rounds, 2)
    return a


if __name__ == "__main__":
    a = parse()
    if a.child:
        asyncio.run(child(a))
    else:
        main(a)
