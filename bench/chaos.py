"""Long mode of the reliability suites (quick mode: tests/reliability, run by CI).

    PYTHONPATH=src python bench/chaos.py --drops 1000 --fuzz 10000 --soak 10000 --seed 1
    PYTHONPATH=src python bench/chaos.py --quiet 20

* drops: the drop points of tests/reliability/test_drops.py, round-robin over surface x provider x point;
  prints how each faulty turn ended, the slowest faulty turn, and every case with a problem.
* fuzz: random mutations (kind, frame, variant) of one frame per turn, on the framework-free turns (and every
  tenth on Pipecat and LiveKit); prints raw exceptions, hangs, stale samples, sockets/tasks left, and the
  problems per mutation kind.
* soak: N turns on one long-lived Pipecat pipeline and one LiveKit TTS object per provider (30 % barge-ins);
  prints stale samples, failed turns, RSS slope (MiB per 1,000 turns), sockets and tasks left.
* quiet: networks that fail without closing (tests/reliability/quiet.py, through the fault proxy). First N
  episodes per (provider, fault) with the package's defaults on the framework-free turns, timing detection:
  a blackhole before the first audio (time from the turn's request to its first audio, or to its typed error),
  a blackhole mid-turn (time from the last audio to the typed error), an idle connection killed silently after
  2 s of idling (time from the request to the first audio, or the error); each followed by a turn that must
  speak. Prints p50 and max per row. Then the quick mode's grid round-robin over knobs (fast, short,
  defaults) x surface x provider x fault (``--quiet-grid M`` cases, default N; 180 covers it once).
* every log line (stdlib logging and loguru, DEBUG) and exception text is scanned for the API keys.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the shared loopback server
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "reliability"))

from harness import PROVIDERS, SURFACES, make_provider, prov_rate, scan_keys, text_of
from quiet import BEFORE_AUDIO, CASES, KNOBS, MID_TURN, run_quiet
from soak import soak
from surfaces import run_case
from test_drops import POINTS

from loopback import KITTA_KINDS, NNS_KINDS, Fault, FaultProxy, LoopbackServer, Mutation
from ttsbridge.errors import TTSBridgeError

KINDS = {"nineninesix": NNS_KINDS, "kitta": KITTA_KINDS}


def category(problem: str) -> str:
    for word in ("raw", "hang", "stale", "socket", "task", "key", "not a full clean turn"):
        if word in problem:
            return word
    return problem[:40]


async def drops(n: int) -> None:
    combos = [(s, p, point, arm, c) for s in SURFACES for p in PROVIDERS for point, arm, c in POINTS[p]]
    ends: Counter[str] = Counter()
    bad: Counter[str] = Counter()
    slowest = 0.0
    t0 = time.monotonic()
    for i in range(n):
        surface, provider, point, arm, cancel = combos[i % len(combos)]
        report = await run_case(surface, provider, arm, cancel_after=cancel)
        ends[report.outcomes[0].kind] += 1
        slowest = max(slowest, report.outcomes[0].elapsed)
        for p in report.problems:
            bad[f"{surface}/{provider}/{point}: {category(p)}"] += 1
    print(
        f"drops: {n} faulty turns over {len(combos)} (surface, provider, point) in {time.monotonic() - t0:.0f} s"
    )
    print(f"  ended with: {dict(ends)}; slowest faulty turn {slowest * 1000:.0f} ms (bound 2,000 ms)")
    print(f"  cases with a problem: {sum(bad.values())} {dict(bad) if bad else ''}")


async def fuzz(n: int, seed: int) -> None:
    rng = random.Random(seed)
    per_kind: Counter[str] = Counter()
    cats: Counter[str] = Counter()
    raw = hangs = stale = frames = 0
    examples: list[str] = []  # the first few cases with a problem, to re-run one by one
    t0 = time.monotonic()
    for i in range(n):
        provider = PROVIDERS[i % 2]
        surface = "turns" if i % 10 else SURFACES[1 + (i // 10) % 2]
        m = Mutation(rng.randint(0, 8), rng.choice(KINDS[provider]), rng.randint(0, 1000))
        report = await run_case(surface, provider, lambda srv, m=m: srv.arm(m))
        frames += 1
        first = report.outcomes[0]
        raw += first.kind == "raw"
        hangs += first.kind == "hang"
        stale += sum(o.stale for o in report.outcomes)
        for p in report.problems:
            per_kind[f"{provider}/{m.kind}"] += 1
            cats[category(p)] += 1
        if report.problems and len(examples) < 5:
            examples.append(f"#{i} {surface}/{provider} {m}: {report.problems}")
    print(f"fuzz: {frames} mutated frames (seed {seed}) in {time.monotonic() - t0:.0f} s")
    print(f"  raw exceptions {raw}, hangs {hangs}, stale samples {stale}")
    print(f"  problems by category: {dict(cats)}")
    print(f"  problems by provider/kind: {dict(per_kind)}")
    for line in examples:
        print(f"    {line}")


async def soaks(n: int, seed: int) -> None:
    for surface in ("pipecat", "livekit"):
        for provider in PROVIDERS:
            t0 = time.monotonic()
            r = await soak(surface, provider, n, barge_rate=0.3, seed=seed, rss_every=max(1, n // 50))
            print(
                f"soak {surface}/{provider}: {r.turns} turns, {r.barge_ins} barge-ins, stale {r.stale}, "
                f"failed {len(r.failed)}, RSS slope {r.rss_slope:+.2f} MiB/1,000 turns "
                f"({len(r.rss)} samples), sockets beyond idle {r.sockets_after_turns}, "
                f"tasks after close {r.tasks_after_close} ({time.monotonic() - t0:.0f} s)"
            )
            for f in r.failed[:3]:
                print(f"    {f}")


async def timed_turn(prov: object, n: int) -> dict[str, float | str | None]:
    """One framework-free turn: when its request went, its first and last audio came, its error came."""
    loop = asyncio.get_running_loop()
    out: dict[str, float | str | None] = {"first": None, "last": None, "error": None, "bytes": 0.0}
    turn = await prov.open_turn(sample_rate=prov_rate(prov))  # type: ignore[attr-defined]
    out["sent"] = loop.time()
    try:
        await turn.send(text_of(n))
        await turn.end()
        async for pcm in turn:
            out["last"] = loop.time()
            out["first"] = out["first"] or out["last"]
            out["bytes"] = float(out["bytes"] or 0) + len(pcm)  # type: ignore[arg-type]
    except TTSBridgeError as exc:
        out["error"] = loop.time()
        out["kind"] = type(exc).__name__
    return out


async def quiet_episode(provider: str, fault: str) -> tuple[str, float, bool]:
    """One fault with the defaults: ``(how the faulty turn ended, detection seconds, next turn spoke)``."""
    async with LoopbackServer(provider) as srv, FaultProxy(srv.port) as proxy:
        prov = make_provider(
            provider, proxy.base_url, standby=fault == "dead_idle", **KNOBS["defaults"][provider]
        )
        try:
            if fault == "dead_idle":
                await timed_turn(prov, 1)
                await asyncio.sleep(IDLE)  # the pooled connection (or the standby) idles, then dies silently
                proxy.blackhole_all()
            else:
                proxy.arm(
                    Fault("blackhole", (BEFORE_AUDIO if fault == "before_audio" else MID_TURN)[provider])
                )
            t = await timed_turn(prov, 2)
            nxt = await timed_turn(prov, 3)
        finally:
            await prov.aclose()
    spoke = nxt["error"] is None and float(nxt["bytes"] or 0) >= 4 * 441 * 2
    if not spoke:
        print(
            f"    the next turn after {provider}/{fault} failed: {nxt.get('kind')} ({nxt['bytes']:.0f} bytes)"
        )
    sent = float(t["sent"])  # type: ignore[arg-type]
    if t["error"] is None:  # it spoke (replayed): the silence cost the time to its first audio
        return "audio", float(t["first"]) - sent, spoke  # type: ignore[arg-type]
    since = float(t["last"]) if fault == "mid_turn" and t["last"] is not None else sent  # type: ignore[arg-type]
    return "typed", float(t["error"]) - since, spoke  # type: ignore[arg-type]


#: how long the connection idles before it is killed (a pooled connection between two turns of a call)
IDLE = 2.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def quiet(n: int, grid: int) -> None:
    t0 = time.monotonic()
    print(f"quiet: detection with the defaults, {n} episodes per row (framework-free turns)")
    for provider in PROVIDERS:
        for fault in ("before_audio", "mid_turn", "dead_idle"):
            ends: Counter[str] = Counter()
            times: list[float] = []
            lost = 0
            for _ in range(n):
                end, seconds, spoke = await quiet_episode(provider, fault)
                ends[end] += 1
                times.append(seconds)
                lost += not spoke
            print(
                f"  {provider:11} {fault:12}: faulty turn {dict(ends)}; silence cost p50 {pct(times, 0.5):.2f} s, "
                f"max {max(times):.2f} s; next turn failed {lost}/{n}"
            )
    combos = [(k, s, p, c) for k in KNOBS for s in SURFACES for p in PROVIDERS for c in CASES]
    bad: Counter[str] = Counter()
    ends: Counter[str] = Counter()
    for i in range(grid):
        knobs, surface, provider, name = combos[i % len(combos)]
        report = await run_quiet(surface, provider, CASES[name], knobs)
        ends[report.outcomes[-2].kind] += 1
        for p in report.problems:
            bad[f"{knobs}/{surface}/{provider}/{name}: {category(p)}"] += 1
    print(f"  grid: {grid} cases over {len(combos)} (knobs, surface, provider, fault); faulty turns {dict(ends)}; "
          f"{sum(bad.values())} problems {dict(bad) if bad else ''}")  # fmt: skip
    print(f"  ({time.monotonic() - t0:.0f} s)")


async def main(args: argparse.Namespace) -> None:
    with scan_keys(keep=False) as scan:
        if args.drops:
            await drops(args.drops)
        if args.fuzz:
            await fuzz(args.fuzz, args.seed)
        if args.soak:
            await soaks(args.soak, args.seed)
        if args.quiet:
            await quiet(args.quiet, args.quiet_grid if args.quiet_grid is not None else args.quiet)
    leaks = scan.leaks()
    print(f"keys: {len(leaks)} of {scan.count} captured log lines and exception texts hold an API key")
    for line in leaks[:3]:
        print(f"    {line[:200]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drops", type=int, default=0)
    ap.add_argument("--fuzz", type=int, default=0)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--quiet", type=int, default=0)
    ap.add_argument("--quiet-grid", type=int, default=None, help="grid cases (default: --quiet)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    asyncio.run(main(a))
