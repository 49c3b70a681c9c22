"""What the TTS adapter itself adds: ours vs the framework's own Cartesia plugin, zero added RTT.

For each framework (Pipecat: ``CartesiaTTSService`` vs ``ttsbridge.pipecat.NineninesixTTSService``; LiveKit:
``livekit.plugins.cartesia.TTS`` vs ``livekit.plugins.nineninesix.TTS``), both systems run in this process
against one emulator in its own process (``bench_peers.py --child`` with no relay: loopback, zero added
RTT), whose per-context timing record (``EmulatorStats.timings``: first request, first chunk sent) is read
over a pipe after every batch. Per turn:

    TTFA overhead = (first audio frame out of the service - text handed to the service)
                  - (server first chunk sent - server first request received)

i.e. the client's own time on the way out and on the way back in, with the server's time taken out. Both
processes read the same monotonic clock (``perf_counter`` is CLOCK_MONOTONIC on Linux), so the two legs are
printed too: text in -> server first request, server first chunk -> audio out (loopback transit included).
Pipecat: "text handed" is when the turn's first ``LLMTextFrame`` is pushed into the TTS service, "audio
out" when the first ``TTSAudioRawFrame`` leaves it (a pipeline ``stamp -> tts -> probe``). LiveKit: from
``tts.stream()`` (+ ``push_text``) to the first ``SynthesizedAudio`` of the stream.

Every stream is one conversation (its own pipeline / TTS instance and connection), warmed up first; a round
is one turn on every stream of a system at once, systems interleaved in rounds with the order rotated,
same texts (a numbered tag per turn lets the bench find the server's record by the first transcript).
CPU per audio second = this process's CPU time during a system's rounds / audio seconds it delivered.
Memory per open service (pipeline or TTS instance, connected, one turn done, idle) and per idle pooled
connection (LiveKit: ``prewarm()``): deltas of this process's RSS and Python heap (tracemalloc) over
``--rss-streams`` instances, measured once per level in the c4 scenario before its rounds.

    python bench/bench_overhead.py [--rounds 6] [--levels pipecat,livekit] [--scenarios all]
                                   [--first-chunk-latency 0]

Scenarios: ``c1`` (one stream: no other stream's work in the way; not in ``all``), ``c4`` (4 streams, unpaced server), ``c50`` (50, unpaced), ``c200`` (200, server paced at real
time), ``c100`` (100, paced: a load the LiveKit peer survives whole; not in ``all``), ``mulaw`` (8 kHz μ-law, 4 streams), ``r24`` / ``r48`` (24 / 48 kHz out, 4 streams; the peers get no audio
at those rates from a spec-exact server, so the peer runs at 16 kHz in the same rounds as the reference).
``--floor`` adds the framework's floor (a plugin with no network) and the network's (a bare aiohttp client, no
framework) to the same rounds of the unpaced scenarios (``floor_systems.py``): their sum is the least any
plugin can reach with one stream. No assertions about speed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_peers import EmulatorProcess, emulator_process
from floor_systems import FLOORS, RawStreams
from overhead_systems import (
    LEVELS,
    OURS_KWARGS,
    TAG,
    LiveKitStreams,
    PipecatStreams,
    Scenario,
    Streams,
    Turn,
    now,
    tag_of,
)


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4  # pages of 4 KiB


SCENARIOS = {
    "c1": Scenario("16 kHz, 1 stream, unpaced", 1, 16000),
    "c4": Scenario("16 kHz, 4 streams, unpaced", 4, 16000),
    "c50": Scenario("16 kHz, 50 streams, unpaced", 50, 16000),
    "c100": Scenario("16 kHz, 100 streams, paced 1x", 100, 16000, paced=True),
    "c200": Scenario("16 kHz, 200 streams, paced 1x", 200, 16000, paced=True),
    "mulaw": Scenario("8 kHz mu-law, 4 streams, unpaced", 4, 8000, "pcm_mulaw"),
    "r24": Scenario("24 kHz out, 4 streams, unpaced", 4, 24000, peer_rate=16000),
    "r48": Scenario("48 kHz out, 4 streams, unpaced", 4, 48000, peer_rate=16000),
}


@dataclass
class Result:
    overhead_ms: list[float] = field(default_factory=list)
    #: the overhead's two legs: text in -> server first request; server first chunk -> audio out
    out_ms: list[float] = field(default_factory=list)
    in_ms: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    audio_s: float = 0.0
    turns: int = 0
    no_audio: int = 0
    unmatched: int = 0
    #: per instance: {"service" / "connection": (RSS KiB, Python heap KiB)}
    memory: dict[str, tuple[float, float]] = field(default_factory=dict)


# -------------------------------------------------------------------------------------------------------------
# one scenario: both systems, warmed, interleaved rounds


def overheads(turns: list[Turn], times: dict[str, list[Any]], res: Result, *, floor: bool = False) -> None:
    """Fold one batch into ``res``: each turn's overhead against the server's record of its context (the
    floor has no server: its overhead is all of text in -> audio out)."""
    if floor:
        for t in turns:
            res.turns += 1
            res.audio_s += t.audio_s
            if t.t_first is None:
                res.no_audio += 1
            else:
                res.overhead_ms.append((t.t_first - t.t_text) * 1000)
        return
    server: dict[int, tuple[float, float]] = {}
    for t_req, t_chunk, text in times.values():
        m = TAG.search(text)
        if m and t_chunk is not None:
            server[tag_of(m.group(1))] = (t_req, t_chunk)
    for t in turns:
        res.turns += 1
        res.audio_s += t.audio_s
        if t.t_first is None:
            res.no_audio += 1
        elif t.tag not in server:
            res.unmatched += 1
        else:
            t_req, t_chunk = server[t.tag]
            res.overhead_ms.append((t.t_first - t.t_text - (t_chunk - t_req)) * 1000)
            # both processes read the same CLOCK_MONOTONIC (perf_counter on Linux): the two legs
            res.out_ms.append((t_req - t.t_text) * 1000)
            res.in_ms.append((t.t_first - t_chunk) * 1000)


async def batch(streams: Streams, n: int, tag0: int) -> list[Turn]:
    return list(await asyncio.gather(*(streams.turn(i, tag0 + i) for i in range(n))))


class Mem:
    """This process's RSS and Python heap (tracemalloc, on for the measurement only), in KiB."""

    def __init__(self) -> None:
        import gc

        gc.collect()
        self.rss = rss_kib()
        self.heap = tracemalloc.get_traced_memory()[0] / 1024

    def per(self, since: Mem, n: int) -> tuple[float, float]:
        return (self.rss - since.rss) / n, (self.heap - since.heap) / n


async def memory_of(level: str, which: str, emu: EmulatorProcess, sc: Scenario, n: int) -> dict[str, Any]:
    """Per instance over ``n`` instances: {label: (RSS KiB, heap KiB)}. An open service: created, started
    (Pipecat: the pipeline's StartFrame; its socket), one turn done, idle. LiveKit's idle pooled
    connection: ``prewarm()`` (the pool opens one), before any turn."""
    tracemalloc.start()
    try:
        base = Mem()
        if level == "livekit":
            s = LiveKitStreams(which, emu, sc)
            await s.start(n)
            built = Mem()
            before = (await emu.stats())["ws_open"]
            for t in s._tts:
                t.prewarm()
            for _ in range(200):  # bounded: until the n connections are open
                opened = (await emu.stats())["ws_open"] - before
                if opened >= n:
                    break
                await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"only {opened} of {n} connections opened")
            pooled = Mem()
            await batch(s, n, 9_000_000)
            used = Mem()
            await s.stop()
            out = {"service": used.per(base, n), "connection": pooled.per(built, n)}
        else:
            p = PipecatStreams(which, emu, sc)
            await p.start(n)
            await batch(p, n, 9_000_000)
            used = Mem()
            await p.stop()
            out = {"service": used.per(base, n)}
    finally:
        tracemalloc.stop()
    await emu.times()
    return out


def system(level: str, which: str, emu: EmulatorProcess, sc: Scenario) -> Streams:
    """peer / ours of the level; with ``--floor`` also the framework's floor and the network's (raw)."""
    if which == "raw":
        return RawStreams(which, emu, sc)
    return (FLOORS if which == "floor" else LEVELS)[level](which, emu, sc)


async def scenario(level: str, sc: Scenario, rounds: int, args: argparse.Namespace) -> dict[str, Result]:
    """Run one scenario of one framework level; returns {"peer": ..., "ours": ...}."""
    # (the floors are unpaced: not comparable in a paced scenario)
    whiches = ["peer", "ours", "floor", "raw"] if args.floor and not sc.paced else ["peer", "ours"]
    peer_sc = replace(sc, rate=sc.peer_rate) if sc.peer_rate else sc
    results = {w: Result() for w in whiches}
    async with emulator_process(args.first_chunk_latency, 1.0 if sc.paced else 0.0, 0.0, 0.0) as emu:
        if args.rss_streams and sc.name == SCENARIOS["c4"].name:
            for w in ("peer", "ours"):
                await memory_of(level, w, emu, sc, 2)  # first use: imports and caches, not per instance
            for w in ("peer", "ours"):
                results[w].memory = await memory_of(level, w, emu, sc, args.rss_streams)
        systems = {w: system(level, w, emu, peer_sc if w == "peer" else sc) for w in whiches}
        try:
            for s in systems.values():
                await s.start(sc.streams)
                for _ in range(args.warmup):
                    await batch(s, sc.streams, 8_000_000)
            await emu.times()
            # What is alive now (both frameworks, their modules and the warmed systems) is never garbage: move
            # it out of the collector's reach, so a full collection does not walk it in the middle of one
            # system's round (one took ~100 ms here and landed on whichever system ran at the time).
            gc.collect()
            gc.freeze()
            for r in range(rounds):
                order = whiches[r % len(whiches) :] + whiches[: r % len(whiches)]
                for w in order:
                    tag0 = (r * len(whiches) + whiches.index(w)) * 1000
                    c0 = time.process_time()
                    turns = await batch(systems[w], sc.streams, tag0)
                    results[w].cpu_s += time.process_time() - c0
                    overheads(turns, await emu.times(), results[w], floor=w == "floor")
        finally:
            gc.unfreeze()
            for s in systems.values():
                await s.stop()
    return results


# -------------------------------------------------------------------------------------------------------------
# report


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[int(q) - 1]


def fmt_row(label: str, r: Result) -> str:
    xs = r.overhead_ms
    cpu = r.cpu_s / r.audio_s if r.audio_s else float("nan")
    missing = f"{r.no_audio} no audio" + (f", {r.unmatched} unmatched" if r.unmatched else "")
    return (
        f"  {label:<5} p50 {pct(xs, 50):7.1f}  p95 {pct(xs, 95):7.1f}  p99 {pct(xs, 99):7.1f} ms   "
        f"CPU {cpu:.4f} s/audio s   {r.turns} turns, {missing}\n"
        f"        legs p50: text in -> server request {pct(r.out_ms, 50):.1f} ms, "
        f"server chunk -> audio out {pct(r.in_ms, 50):.1f} ms; p95 {pct(r.out_ms, 95):.1f} / {pct(r.in_ms, 95):.1f} ms"
    )


def ratios(ours: Result, peer: Result, label: str = "ours") -> str:
    def q(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b == b and a == a and b > 0 else "n/a"

    o, p = ours.overhead_ms, peer.overhead_ms
    co = ours.cpu_s / ours.audio_s if ours.audio_s else float("nan")
    cp = peer.cpu_s / peer.audio_s if peer.audio_s else float("nan")
    return (
        f"  {label}/peer p50 {q(pct(o, 50), pct(p, 50))}  p95 {q(pct(o, 95), pct(p, 95))}  "
        f"p99 {q(pct(o, 99), pct(p, 99))}  CPU {q(co, cp)}"
    )


def report(level: str, key: str, sc: Scenario, res: dict[str, Result]) -> None:
    print(f"{level} / {key}: {sc.name}", flush=True)
    for w, r in res.items():
        print(fmt_row(w, r))
    note = f"   (peer at {sc.peer_rate} Hz in the same rounds)" if sc.peer_rate else ""
    print(ratios(res["ours"], res["peer"]) + note)
    if "floor" in res:  # the least ours/peer any plugin could reach in this run (see floor_systems.py)
        print(ratios(res["floor"], res["peer"], "floor") + note)
        print(ratios(res["raw"], res["peer"], "raw") + note)
        # what each plugin adds beyond both floors (meaningful where they add up: one stream, a few)
        base = pct(res["floor"].overhead_ms, 50) + pct(res["raw"].overhead_ms, 50)
        gp, go = pct(res["peer"].overhead_ms, 50) - base, pct(res["ours"].overhead_ms, 50) - base
        print(f"  glue p50 (overhead - floor - raw): peer {gp:.2f} ms, ours {go:.2f} ms")
    for w, r in res.items():
        for label, (rss, heap) in r.memory.items():
            what = "open service" if label == "service" else "idle pooled connection"
            print(f"  {w:<5} per {what}: RSS {rss:.0f} KiB, Python heap {heap:.0f} KiB")
    print(flush=True)


async def main(args: argparse.Namespace) -> None:
    keys = (
        [k for k in SCENARIOS if k not in ("c1", "c100")]
        if args.scenarios == "all"
        else [k.strip() for k in args.scenarios.split(",")]
    )
    if args.ours_no_words:
        OURS_KWARGS["word_timestamps"] = False
    t0 = now()
    print(
        ("ours: word_timestamps=False\n" if args.ours_no_words else "")
        + f"TTFA overhead = (first audio out - text in) - (server first chunk - server first request); "
        f"emulator in its own process, zero added RTT, first chunk latency {args.first_chunk_latency * 1000:.0f}"
        f" ms; {args.warmup} warm-up turn(s) per stream; rounds {args.rounds} (c100, c200: {args.rounds_200})\n",
        flush=True,
    )
    for level in [x.strip() for x in args.levels.split(",") if x.strip()]:
        done: dict[str, dict[str, Result]] = {}
        for key in keys:
            sc = SCENARIOS[key]
            t1 = now()
            rounds = args.rounds_200 if key in ("c100", "c200") else args.rounds
            done[key] = await scenario(level, sc, rounds, args)
            report(level, key, sc, done[key])
            print(f"[{level}/{key} in {now() - t1:.0f} s]", file=sys.stderr, flush=True)
    print(f"(total {now() - t0:.0f} s)")


def quiet_logs(level: str) -> None:
    logging.basicConfig(level=level)
    with contextlib.suppress(ImportError):  # Pipecat logs through loguru
        from loguru import logger

        logger.remove()
        if level.upper() != "CRITICAL":
            logger.add(sys.stderr, level=level.upper())


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=6, help="rounds per scenario (each system once a round)")
    ap.add_argument("--rounds-200", type=int, default=2, help="rounds of the 200-stream scenario")
    ap.add_argument("--warmup", type=int, default=1, help="warm-up turns per stream, not counted")
    ap.add_argument("--levels", default="pipecat,livekit", help="comma list of pipecat, livekit")
    ap.add_argument("--scenarios", default="all", help=f"comma list of {', '.join(SCENARIOS)} or all")
    ap.add_argument("--first-chunk-latency", type=float, default=0.0, help="emulator: seconds to first chunk")
    ap.add_argument("--rss-streams", type=int, default=20, help="instances for the RSS deltas (0: skip)")
    ap.add_argument(
        "--ours-no-words",
        action="store_true",
        help="ours with word_timestamps=False (no estimated word timing; the peers get none from this server)",
    )
    ap.add_argument(
        "--floor",
        action="store_true",
        help="also run the framework's floor (a plugin with no network: floor_systems.py) in the same rounds",
    )
    ap.add_argument("--log-level", default="CRITICAL")
    return ap.parse_args(argv)


if __name__ == "__main__":
    a = parse()
    quiet_logs(a.log_level)
    asyncio.run(main(a))
