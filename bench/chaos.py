"""Long mode of the reliability suites (quick mode: tests/reliability, run by CI).

    PYTHONPATH=src python bench/chaos.py --drops 1000 --fuzz 10000 --soak 10000 --seed 1

* drops: the drop points of tests/reliability/test_drops.py, round-robin over surface x provider x point;
  prints how each faulty turn ended, the slowest faulty turn, and every case with a problem.
* fuzz: random mutations (kind, frame, variant) of one frame per turn, on the framework-free turns (and every
  tenth on Pipecat and LiveKit); prints raw exceptions, hangs, stale samples, sockets/tasks left, and the
  problems per mutation kind.
* soak: N turns on one long-lived Pipecat pipeline and one LiveKit TTS object per provider (30 % barge-ins);
  prints stale samples, failed turns, RSS slope (MiB per 1,000 turns), sockets and tasks left.
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

from harness import PROVIDERS, SURFACES, scan_keys
from soak import soak
from surfaces import run_case
from test_drops import POINTS

from loopback import KITTA_KINDS, NNS_KINDS, Mutation

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


async def main(args: argparse.Namespace) -> None:
    with scan_keys(keep=False) as scan:
        if args.drops:
            await drops(args.drops)
        if args.fuzz:
            await fuzz(args.fuzz, args.seed)
        if args.soak:
            await soaks(args.soak, args.seed)
    leaks = scan.leaks()
    print(f"keys: {len(leaks)} of {scan.count} captured log lines and exception texts hold an API key")
    for line in leaks[:3]:
        print(f"    {line[:200]}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drops", type=int, default=0)
    ap.add_argument("--fuzz", type=int, default=0)
    ap.add_argument("--soak", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    asyncio.run(main(a))
