"""Where ours' first audio waits on the way in: bench_overhead.py's Pipecat rounds with the in leg split.

The in leg of a turn's TTFA overhead (the server's first chunk sent -> the first audio frame out of the TTS
service) is cut at two points of ours, time-stamped as the first audio passes them:

- **chunk -> dispatch**: the server sent the chunk; the engine's connection dispatched the turn's first
  ``AudioReceived`` (the socket's read, the frame parse, the protocol);
- **dispatch -> push**: the adapter's reader took it and pushed it into the turn's Pipecat audio context;
- **push -> out**: Pipecat's audio-context task took it from the context's queue and pushed it downstream (the
  probe after the service).

Only ours is cut (the peer has no such points); its whole in leg is printed beside ours for reference. The
cuts are timestamps taken by wrapping two of ours' methods in this process (no change to their behaviour).

    python bench/profile_in_leg.py [--streams 50] [--rounds 16] [--first-chunk-latency 0.05]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_overhead
import overhead_systems
from bench_overhead import TAG, Result, overheads, pct, quiet_logs
from bench_peers import emulator_process
from overhead_systems import PipecatStreams, Scenario

from ttsbridge.engine import connection
from ttsbridge.engine.events import AudioReceived
from ttsbridge.pipecat import _ws_audio


class Cuts:
    """Timestamps of each turn's first audio at the engine's dispatch (by turn id) and at the adapter's push
    (by Pipecat context id, with the turn id it belongs to)."""

    def __init__(self) -> None:
        self.dispatched: dict[str, float] = {}
        self.pushed: dict[str, tuple[float, str]] = {}

    def install(self) -> None:
        dispatch, push = connection.Connection._dispatch, _ws_audio._TurnAudioService._push_audio
        dispatched, pushed = self.dispatched, self.pushed

        def _dispatch(conn: Any, events: list[Any]) -> None:
            t = time.perf_counter()
            for ev in events:
                if type(ev) is AudioReceived and ev.first:
                    dispatched[ev.turn_id] = t
            dispatch(conn, events)

        async def _push_audio(service: Any, state: Any, rate: int, pcm: bytes) -> None:
            if state.first_audio_at is None:
                pushed[state.context_id] = (time.perf_counter(), state.turn.id)
            await push(service, state, rate, pcm)

        connection.Connection._dispatch = _dispatch  # type: ignore[method-assign]
        _ws_audio._TurnAudioService._push_audio = _push_audio  # type: ignore[method-assign]


async def run(args: argparse.Namespace) -> None:
    cuts = Cuts()
    cuts.install()
    overhead_systems.TEXT = "Okay {tag:07d}, I can help you with that."
    sc = Scenario(f"{args.streams} streams, unpaced", args.streams, 16000)
    legs: dict[str, list[float]] = {"chunk -> dispatch": [], "dispatch -> push": [], "push -> out": []}
    whole = {"ours": Result(), "peer": Result()}
    async with emulator_process(args.first_chunk_latency, 0.0, 0.0, 0.0) as emu:
        systems = {w: PipecatStreams(w, emu, sc) for w in ("peer", "ours")}
        for s in systems.values():
            await s.start(sc.streams)
            await bench_overhead.batch(s, sc.streams, 8_000_000)
        await emu.times()
        try:
            for r in range(args.rounds):
                for w in ("peer", "ours") if r % 2 else ("ours", "peer"):
                    turns = await bench_overhead.batch(systems[w], sc.streams, (2 * r + (w == "ours")) * 1000)
                    times = await emu.times()
                    overheads(turns, times, whole[w])
                    if w != "ours":
                        continue
                    chunk_at = {
                        int(m.group(1)): t_chunk
                        for _, t_chunk, text in times.values()
                        if (m := TAG.search(text))
                    }
                    for t in turns:
                        pushed = cuts.pushed.get(t.context_id or "")
                        if pushed is None or t.t_first is None or t.tag not in chunk_at:
                            continue
                        t_push, turn_id = pushed
                        t_disp = cuts.dispatched.get(turn_id)
                        if t_disp is None:
                            continue
                        legs["chunk -> dispatch"].append((t_disp - chunk_at[t.tag]) * 1000)
                        legs["dispatch -> push"].append((t_push - t_disp) * 1000)
                        legs["push -> out"].append((t.t_first - t_push) * 1000)
        finally:
            for s in systems.values():
                await s.stop()
    print(
        f"pipecat, {args.streams} streams unpaced, {args.rounds} rounds, first chunk latency "
        f"{args.first_chunk_latency * 1000:.0f} ms (ms)"
    )
    for w, res in whole.items():
        print(
            f"  {w:<4} in leg (server chunk -> audio out): p50 {pct(res.in_ms, 50):6.2f}  p95 {pct(res.in_ms, 95):6.2f}"
            f"   TTFA overhead p50 {pct(res.overhead_ms, 50):6.1f}  p95 {pct(res.overhead_ms, 95):6.1f}"
        )
    for name, xs in legs.items():
        print(f"  ours {name:<18} p50 {pct(xs, 50):6.2f}  p95 {pct(xs, 95):6.2f}  (n {len(xs)})")
    if legs["push -> out"]:
        print(
            f"  (share of ours' in leg after the push, median: {statistics.median(legs['push -> out']) / max(pct(whole['ours'].in_ms, 50), 1e-9):.2f})"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--first-chunk-latency", type=float, default=0.05)
    ap.add_argument("--log-level", default="CRITICAL")
    a = ap.parse_args()
    quiet_logs(a.log_level)
    asyncio.run(run(a))
