"""The small box: what ours costs a process beside the peers (Pipecat's Cartesia service, LiveKit's cartesia plugin).

Pipecat Cloud's standard agent is 0.5 vCPU / 1 GB on ARM, and LiveKit's guidance is about 6 sessions per core for
the whole pipeline, so a TTS plugin's import time, idle memory and CPU per stream matter. Three figures per
system, each from fresh processes:

1. **import time**: ``python -X importtime -c "<the import an app writes>"``, the sum of the cumulative times of
   the statement's top-level imports (microseconds, as ``-X importtime`` prints them), median of ``--runs``
   processes (run in turns, systems interleaved). Also each system's wall time of the import statement.
   ``framework`` rows are the framework's base alone (what every plugin of it pays).
2. **RSS after import** (``/proc/self/statm``), median of the same processes; and **RSS per additional
   concurrent stream**: one process per (system, level) opens ``N`` streams (one pipeline / TTS instance each,
   warmed), runs ``--rounds`` turns back to back on each at 1x pace, and reads its RSS (idle after the warm-up
   and the peak sampled every 20 ms during the turns); per stream = the slope between the two ``--levels``.
3. **CPU per stream at 1x pace pinned to one core**: the same process under ``taskset -c 0`` (the emulator moved
   to core 1): process CPU time over the rounds / wall time / streams (a share of one core), and CPU seconds
   per audio second.

    python bench/bench_footprint.py                         # all three (~3 min)
    python bench/bench_footprint.py --only imports --runs 15
    python bench/bench_footprint.py --only streams --levels 25,50 --rounds 2

Prints a table per figure with ours, the peer and ours/peer. No assertions about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve()

#: the import an app writes, per (framework, system)
IMPORTS: dict[tuple[str, str], str] = {
    ("pipecat", "framework"): "import pipecat.services.tts_service",
    ("pipecat", "peer"): "from pipecat.services.cartesia.tts import CartesiaTTSService",
    ("pipecat", "ours"): "from ttsbridge.pipecat import NineninesixTTSService",
    ("pipecat", "ours-kitta"): "from ttsbridge.pipecat import KittaTTSService",
    ("livekit", "framework"): "import livekit.agents",
    ("livekit", "peer"): "from livekit.plugins import cartesia",
    ("livekit", "ours"): "from livekit.plugins import nineninesix",
    ("livekit", "ours-kitta"): "from livekit.plugins import kitta",
}

#: what a child prints after the import: the statement's wall time and the RSS then
_PROBE = (
    "import sys as _s, time as _t; _s.stderr.write('FOOTPRINT-START\\n'); _s.stderr.flush(); "
    "_t0 = _t.perf_counter(); {stmt}; _w = _t.perf_counter() - _t0; "
    "print('FOOTPRINT', _w, int(open('/proc/self/statm').read().split()[1]) * 4)"
)


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def import_once(stmt: str) -> tuple[float, float, int]:
    """One fresh process: (-X importtime sum of the statement's top-level imports in ms, wall ms, RSS KiB)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", _PROBE.format(stmt=stmt)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
        timeout=120,
        check=True,
    )
    # the lines after the probe's marker are the statement's; top level = no indentation
    lines = out.stderr.splitlines()
    start = lines.index("FOOTPRINT-START") + 1
    total_us = 0
    for ln in lines[start:]:
        if not ln.startswith("import time:"):
            continue
        _self, cumulative, name = ln.split(":", 1)[1].split("|")
        if not name.startswith("  ") and name.strip():
            total_us += int(cumulative)
    tag = next(ln for ln in out.stdout.splitlines() if ln.startswith("FOOTPRINT"))
    _, wall, rss = tag.split()
    return total_us / 1000, float(wall) * 1000, int(rss)


def imports(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    keys = [k for k in IMPORTS if k[0] in args.frameworks.split(",")]
    got: dict[tuple[str, str], list[tuple[float, float, int]]] = {k: [] for k in keys}
    for k in keys:  # one untimed run each: .pyc files written, the page cache warm
        import_once(IMPORTS[k])
    for r in range(args.runs):
        for k in keys[r % len(keys) :] + keys[: r % len(keys)]:  # interleaved, the order rotated
            got[k].append(import_once(IMPORTS[k]))
    return {
        f"{fw}/{which}": {
            "importtime_ms": statistics.median(x[0] for x in v),
            "wall_ms": statistics.median(x[1] for x in v),
            "rss_kib": statistics.median(x[2] for x in v),
        }
        for (fw, which), v in got.items()
    }


# -------------------------------------------------------------------------------------------------------------
# streams: one child process per (framework, system, level)


async def stream_child(framework: str, which: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    import overhead_systems
    from bench_overhead import quiet_logs, system
    from bench_peers import emulator_process
    from overhead_systems import Scenario

    from ttsbridge.emulator import tone_duration

    quiet_logs("CRITICAL")
    rss_start = rss_kib()  # (the bench harness only: the framework is imported below)
    overhead_systems.TEXT = "Okay {tag}, I can help you with all of that today."
    turn_s = tone_duration(overhead_systems.TEXT.format(tag=overhead_systems.tag_word(0)))
    async with emulator_process(0.05, 1.0, 0.0, 0.0) as emu:
        if args.pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
            os.sched_setaffinity(emu._proc.pid, {1})  # the server off the client's core
        s = system(framework, which, emu, Scenario(f"{n} streams", n, 16000, paced=True))
        await s.start(n)
        await asyncio.gather(*(s.turn(i, 9_000_000 + i) for i in range(n)))
        await emu.times()
        rss_idle = rss_kib()
        peak = rss_idle

        async def sample() -> None:
            nonlocal peak
            while True:
                await asyncio.sleep(0.02)
                peak = max(peak, rss_kib())

        async def stream(i: int) -> list[Any]:
            await asyncio.sleep(i * turn_s / n)
            return [await s.turn(i, 1_000_000 + r * 1000 + i) for r in range(args.rounds)]

        sampler = asyncio.create_task(sample())
        w0, c0 = time.perf_counter(), time.process_time()
        turns = [t for ts in await asyncio.gather(*(stream(i) for i in range(n))) for t in ts]
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        sampler.cancel()
        await s.stop()
    audio = sum(t.audio_s for t in turns)
    return {
        "framework": framework,
        "system": which,
        "streams": n,
        "rss_start_kib": rss_start,
        "rss_idle_kib": rss_idle,
        "rss_peak_kib": peak,
        "cpu_share_per_stream": cpu / wall / n if wall else float("nan"),
        "cpu_per_audio_s": cpu / audio if audio else float("nan"),
        "complete": sum(1 for t in turns if t.t_first is not None and t.audio_s >= 0.9 * turn_s),
        "turns": len(turns),
        "pinned": bool(args.pin),
    }


def run_stream_child(framework: str, which: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [sys.executable, str(HERE), "--child", framework, which, str(n), "--rounds", str(args.rounds)]
    if args.pin and shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        cmd = ["taskset", "-c", "0", *cmd, "--pin"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    return json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("{")))


def streams(args: argparse.Namespace) -> list[dict[str, Any]]:
    levels = [int(x) for x in args.levels.split(",")]
    got = []
    for fw in args.frameworks.split(","):
        for n in levels:
            for which in ("peer", "ours"):  # each in a process of its own, alternating
                lv = run_stream_child(fw, which, n, args)
                print(
                    f"  {fw} {which} {n} streams: RSS at start {lv['rss_start_kib'] / 1024:.1f} MiB, idle "
                    f"{lv['rss_idle_kib'] / 1024:.1f}, peak {lv['rss_peak_kib'] / 1024:.1f}; CPU "
                    f"{lv['cpu_share_per_stream'] * 100:.2f} % of a core per stream, {lv['cpu_per_audio_s']:.4f} "
                    f"s/audio s ({lv['complete']}/{lv['turns']} turns complete)",
                    file=sys.stderr,
                    flush=True,
                )
                got.append(lv)
    return got


# -------------------------------------------------------------------------------------------------------------
# report


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def report(imp: dict[str, dict[str, float]], st: list[dict[str, Any]], args: argparse.Namespace) -> None:
    fws = args.frameworks.split(",")
    if imp:
        print(
            f"\nimport time (-X importtime, ms; median of {args.runs} processes each) and RSS after import (MiB)"
        )
        print(
            "| framework | import | framework alone | peer | ours | ours/peer | ours (Kitta) | Kitta/peer |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for fw in fws:
            for what, key, scale in (("import time ms", "importtime_ms", 1), ("RSS MiB", "rss_kib", 1024)):
                base, peer, ours, kitta = (
                    imp[f"{fw}/{w}"][key] / scale for w in ("framework", "peer", "ours", "ours-kitta")
                )
                print(
                    f"| {fw} | {what} | {base:.1f} | {peer:.1f} | {ours:.1f} | **{_ratio(ours, peer)}** "
                    f"| {kitta:.1f} | {_ratio(kitta, peer)} |"
                )
        print("\nthe statements:")
        for (fw, which), stmt in IMPORTS.items():
            if fw in fws:
                print(f"  {fw:<8} {which:<10} {stmt}")
    if st:
        levels = sorted({lv["streams"] for lv in st})
        lo, hi = levels[0], levels[-1]

        def get(fw: str, which: str, n: int) -> dict[str, Any]:
            return next(lv for lv in st if (lv["framework"], lv["system"], lv["streams"]) == (fw, which, n))

        pin = "pinned to one core (taskset -c 0)" if args.pin else "not pinned"
        print(f"\nper stream, 1x pace, {args.rounds} rounds of ~3.2 s turns, {pin}")
        print("| framework | figure | peer | ours | ours/peer |")
        print("| --- | --- | --- | --- | --- |")
        for fw in fws:
            rows = []
            if hi > lo:
                slope = {
                    w: (get(fw, w, hi)["rss_peak_kib"] - get(fw, w, lo)["rss_peak_kib"]) / (hi - lo)
                    for w in ("peer", "ours")
                }
                rows.append((f"RSS per additional stream, {lo}->{hi} streams, peak (KiB)", slope, ".0f"))
                idle = {
                    w: (get(fw, w, hi)["rss_idle_kib"] - get(fw, w, lo)["rss_idle_kib"]) / (hi - lo)
                    for w in ("peer", "ours")
                }
                rows.append((f"RSS per additional open stream, {lo}->{hi}, idle (KiB)", idle, ".0f"))
            for n in levels:
                cpu = {w: get(fw, w, n)["cpu_share_per_stream"] * 100 for w in ("peer", "ours")}
                rows.append((f"CPU per stream at {n} streams (% of a core)", cpu, ".3f"))
                per_audio = {w: get(fw, w, n)["cpu_per_audio_s"] for w in ("peer", "ours")}
                rows.append((f"CPU s per audio s at {n} streams", per_audio, ".4f"))
            for label, v, spec in rows:
                print(
                    f"| {fw} | {label} | {v['peer']:{spec}} | {v['ours']:{spec}} | **{_ratio(v['ours'], v['peer'])}** |"
                )


def main(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    imp = imports(args) if args.only in ("all", "imports") else {}
    st = streams(args) if args.only in ("all", "streams") else []
    report(imp, st, args)
    print(
        f"\n(python {sys.version.split()[0]}, {os.cpu_count()} cores, total {time.perf_counter() - t0:.0f} s)"
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frameworks", default="pipecat,livekit")
    ap.add_argument("--only", default="all", choices=["all", "imports", "streams"])
    ap.add_argument("--runs", type=int, default=9, help="fresh processes per import")
    ap.add_argument("--levels", default="25,50", help="two stream counts: the RSS slope between them")
    ap.add_argument("--rounds", type=int, default=2, help="turns per stream at each level")
    ap.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin the client to core 0")
    ap.add_argument("--pin", dest="pin_child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        a.pin = a.pin_child
    return a


if __name__ == "__main__":
    a = parse()
    if a.child:
        print(json.dumps(asyncio.run(stream_child(a.child[0], a.child[1], int(a.child[2]), a))), flush=True)
    else:
        main(a)
