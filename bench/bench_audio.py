"""Benchmark of the streaming audio path: μ-law decode + resample + 20 ms framing.

Run: ``python bench/bench_audio.py [--seconds 10] [--reps 7]``. Prints a table; no assertions.

For each rate pair, a μ-law stream (a speech-like mix of tones with an envelope) is fed in chunks of 20-40 ms
(fixed random sizes) through

* ``ttsbridge``: ``g711.ulaw_decode`` -> ``StreamResampler.process`` -> ``AudioFramer.push`` (+ flush);
* baseline ``audioop`` (Python < 3.13 only): ``audioop.ulaw2lin`` -> ``audioop.ratecv`` (stateful,
  linear interpolation: lower quality) -> the same framer;
* baseline ``per-chunk one-shot``: ``g711.ulaw_decode`` -> ``resample_oneshot`` on every chunk (the naive,
  stateless approach: clicks at chunk boundaries) -> the same framer.

CPU time (``time.process_time``) per second of audio is the median over several repetitions, all measured in
the same run; ratios are baseline CPU / ttsbridge CPU (> 1 means ttsbridge is faster).

Second table, turn-start ("first-output") latency of ``StreamResampler`` (PCM16 in, HQ): a turn streamed in
fixed 20 or 40 ms chunks; "first out" is how many ms of input audio have to arrive before ``process()``
returns the first output sample (a multiple of the chunk length), for the stream-only resampler this package
used before (``_StreamOnlyResampler`` below, a copy of it) and the current one; "max gap" is the longest run
of input (ms) after the first output during which no output comes out (the stream's block jitter, the
same for both). CPU is per chunk, averaged over whole turns of ``--turn`` seconds (the turn-start one-shots
included), new / old; "extra/turn" is the added CPU per turn.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Protocol

import numpy as np
import soxr

from ttsbridge.audio import AudioFramer, StreamResampler, resample_oneshot, tone, ulaw_decode, ulaw_encode

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import audioop as _audioop
    audioop: ModuleType | None = _audioop
except ImportError:
    audioop = None

RATE_PAIRS = [(8000, 24000), (8000, 48000), (16000, 24000), (16000, 48000), (22050, 24000), (22050, 48000)]

Pipeline = Callable[[list[bytes], int, int], int]


def make_ulaw(seconds: float, rate: int) -> bytes:
    t = np.arange(round(seconds * rate)) / rate
    env = 0.5 + 0.5 * np.sin(2 * np.pi * 3.0 * t)
    sig = env * (0.4 * np.sin(2 * np.pi * 180 * t) + 0.2 * np.sin(2 * np.pi * 720 * t))
    sig += 0.05 * np.sin(2 * np.pi * 2300 * t)
    pcm = np.round(sig * 32767).astype("<i2").tobytes()
    return ulaw_encode(pcm)


def chunk(data: bytes, rate: int, seed: int) -> list[bytes]:
    """Split μ-law bytes (1 byte per sample) into chunks of 20-40 ms."""
    rng = random.Random(seed)
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        n = round(rng.uniform(0.020, 0.040) * rate)
        out.append(data[pos : pos + n])
        pos += n
    return out


def run_ttsbridge(chunks: list[bytes], in_rate: int, out_rate: int) -> int:
    resampler = StreamResampler(in_rate, out_rate)
    framer = AudioFramer(out_rate, 20.0)
    n = 0
    for c in chunks:
        for frame in framer.push(resampler.process(ulaw_decode(c))):
            n += len(frame)
    for frame in framer.push(resampler.flush()):
        n += len(frame)
    rest = framer.flush()
    return n + (len(rest) if rest else 0)


def run_audioop(chunks: list[bytes], in_rate: int, out_rate: int) -> int:
    assert audioop is not None
    ratecv = audioop.ratecv
    ulaw2lin = audioop.ulaw2lin
    framer = AudioFramer(out_rate, 20.0)
    state = None
    n = 0
    for c in chunks:
        pcm, state = ratecv(ulaw2lin(c, 2), 2, 1, in_rate, out_rate, state)
        for frame in framer.push(pcm):
            n += len(frame)
    rest = framer.flush()
    return n + (len(rest) if rest else 0)


def run_oneshot(chunks: list[bytes], in_rate: int, out_rate: int) -> int:
    framer = AudioFramer(out_rate, 20.0)
    n = 0
    for c in chunks:
        for frame in framer.push(resample_oneshot(ulaw_decode(c), in_rate, out_rate)):
            n += len(frame)
    rest = framer.flush()
    return n + (len(rest) if rest else 0)


def measure(fn: Pipeline, chunks: list[bytes], in_rate: int, out_rate: int, reps: int) -> float:
    """Median CPU seconds for one pass over ``chunks``."""
    fn(chunks, in_rate, out_rate)  # warm-up
    times: list[float] = []
    for _ in range(reps):
        t0 = time.process_time()
        fn(chunks, in_rate, out_rate)
        times.append(time.process_time() - t0)
    return statistics.median(times)


class _StreamOnlyResampler:
    """Baseline: ``StreamResampler.process/flush`` as they were before the turn-start one-shots (commit
    99416b3): a bare soxr stream per turn, odd-byte carry, float32 rounded to int16. Passthrough and
    argument checks left out (not benchmarked)."""

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        self._args = (in_rate, out_rate, 1)
        self._quality = quality
        self._carry = b""
        self._stream = self._new_stream()

    def _new_stream(self) -> soxr.ResampleStream:
        return soxr.ResampleStream(*self._args, dtype="float32", quality=self._quality)

    def _whole_samples(self, pcm: bytes) -> bytes:
        if self._carry:
            pcm = self._carry + bytes(pcm)
            self._carry = b""
        n = len(pcm)
        if n % 2:
            self._carry = bytes(pcm[n - 1 : n])
            pcm = pcm[: n - 1]
        return pcm

    def process(self, pcm: bytes) -> bytes:
        data = self._whole_samples(pcm)
        if not data:
            return b""
        out = self._stream.resample_chunk(np.frombuffer(data, dtype="<i2").astype(np.float32))
        return np.clip(np.rint(out), -32768.0, 32767.0).astype("<i2").tobytes()

    def flush(self) -> bytes:
        self._carry = b""
        out = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self._stream = self._new_stream()
        return np.clip(np.rint(out), -32768.0, 32767.0).astype("<i2").tobytes()


class _Resampler(Protocol):  # what both resamplers offer
    def process(self, pcm: bytes) -> bytes: ...
    def flush(self) -> bytes: ...


TURN_START_PAIRS = [
    (22050, 8000),
    (22050, 16000),
    (22050, 24000),
    (22050, 44100),
    (22050, 48000),
    (8000, 24000),
    (8000, 48000),
    (16000, 24000),
    (16000, 48000),
    (24000, 8000),
    (24000, 16000),
]


def turn_chunks(in_rate: int, chunk_ms: int, seconds: float) -> list[bytes]:
    pcm = tone(440.0, seconds, in_rate)
    n = 2 * round(in_rate * chunk_ms / 1000)
    return [pcm[i : i + n] for i in range(0, len(pcm), n)]


def output_timing(r: _Resampler, chunks: list[bytes], chunk_ms: int) -> tuple[float, float]:
    """(ms of input before the first output, longest run of input ms without output after that)."""
    first: float | None = None
    gap = worst_gap = 0
    for i, c in enumerate(chunks):
        out = r.process(c)
        if first is None:
            if out:
                first = (i + 1) * chunk_ms
        elif out:
            gap = 0
        else:
            gap += chunk_ms
            worst_gap = max(worst_gap, gap)
    r.flush()
    return (first if first is not None else float("nan")), float(worst_gap)


#: Chunks starting within this much input from the turn start count as "start"; the rest as "steady".
#: (The turn-start one-shots of the HQ pairs here end within 160 ms.)
START_S = 0.25


def turn_cpu(
    resamplers: list[_Resampler], chunks: list[bytes], n_start: int, reps: int
) -> list[tuple[float, float]]:
    """Per resampler, median CPU seconds for one turn's first ``n_start`` chunks and for the rest (+ flush),
    on a reused resampler. The resamplers take turns within each repetition so that they share the load."""
    for r in resamplers:  # warm-up
        for c in chunks:
            r.process(c)
        r.flush()
    head = chunks[:n_start]
    rest = chunks[n_start:]
    times: list[tuple[list[float], list[float]]] = [([], []) for _ in resamplers]
    clock = time.process_time
    for _ in range(reps):
        for r, (t_start, t_rest) in zip(resamplers, times, strict=True):
            t0 = clock()
            for c in head:
                r.process(c)
            t1 = clock()
            for c in rest:
                r.process(c)
            r.flush()
            t2 = clock()
            t_start.append(t1 - t0)
            t_rest.append(t2 - t1)
    return [(statistics.median(a), statistics.median(b)) for a, b in times]


def turn_start_table(turn_s: float, reps: int) -> None:
    print()
    print(
        f"Turn start, PCM16 HQ, a {turn_s:g} s turn in fixed chunks: ms of input before the first output, "
        f"old (stream only) vs new; CPU per chunk over whole turns, median of {reps}"
    )
    header = (
        f"{'in->out Hz':>13} {'chunk':>5}  {'first out old':>13} {'new':>5}  {'max gap':>7}"
        f"  {'CPU/chunk old':>13} {'new':>7} {'new/old':>7}  {'steady new/old':>14} {'extra/turn':>10}"
    )
    print(header)
    print("-" * len(header))
    for in_rate, out_rate in TURN_START_PAIRS:
        for chunk_ms in (20, 40):
            chunks = turn_chunks(in_rate, chunk_ms, turn_s)
            old_first, old_gap = output_timing(_StreamOnlyResampler(in_rate, out_rate), chunks, chunk_ms)
            new_first, new_gap = output_timing(StreamResampler(in_rate, out_rate), chunks, chunk_ms)
            gap = f"{old_gap:g}" if old_gap == new_gap else f"{old_gap:g}/{new_gap:g}"
            n_start = round(START_S * 1000 / chunk_ms)
            (old_start, old_rest), (new_start, new_rest) = turn_cpu(
                [_StreamOnlyResampler(in_rate, out_rate), StreamResampler(in_rate, out_rate)],
                chunks,
                n_start,
                reps,
            )
            per_old = (old_start + old_rest) / len(chunks) * 1e6
            per_new = (new_start + new_rest) / len(chunks) * 1e6
            print(
                f"{in_rate:>6}->{out_rate:<6} {chunk_ms:>3}ms"
                f"  {old_first:>11g}ms {new_first:>3g}ms  {gap:>5}ms"
                f"  {per_old:>11.1f}us {per_new:>5.1f}us {per_new / per_old:>6.2f}x"
                f"  {new_rest / old_rest:>13.2f}x {(new_start - old_start) * 1e3:>8.2f}ms"
            )
    start_ms = f"{START_S * 1000:g} ms"
    print("'first out': input audio (ms) that must have arrived before process() returns any audio.")
    print("'max gap': longest input run (ms) without output after the first one (stream block jitter;")
    print("old/new if they differ). 'CPU/chunk': whole turn incl. flush, divided by the number of chunks;")
    print(f"'steady': only the chunks after the first {start_ms};")
    print(f"'extra/turn': added CPU in the first {start_ms} (the turn-start one-shots).")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="audio length per pass (default 10)")
    parser.add_argument("--reps", type=int, default=7, help="repetitions; the median is reported (default 7)")
    parser.add_argument(
        "--turn", type=float, default=2.0, help="turn length for the turn-start table (default 2)"
    )
    args = parser.parse_args()

    pipelines: list[tuple[str, Pipeline]] = [("ttsbridge", run_ttsbridge)]
    if audioop is not None:
        pipelines.append(("audioop", run_audioop))
    pipelines.append(("per-chunk one-shot", run_oneshot))

    print(
        f"μ-law decode + resample + 20 ms framing, {args.seconds:g} s of audio in 20-40 ms chunks, "
        f"median of {args.reps} (CPU time, time.process_time); Python {sys.version.split()[0]}"
    )
    if audioop is None:
        print("(audioop not available on this Python: audioop baseline skipped)")
    header = (
        f"{'in->out Hz':>13}  {'pipeline':<19} {'CPU ms/audio s':>14} {'x real time':>12}"
        f" {'vs ttsbridge':>13}"
    )
    print(header)
    print("-" * len(header))
    for in_rate, out_rate in RATE_PAIRS:
        chunks = chunk(make_ulaw(args.seconds, in_rate), in_rate, seed=in_rate + out_rate)
        base: float | None = None
        for name, fn in pipelines:
            cpu = measure(fn, chunks, in_rate, out_rate, args.reps)
            per_s = cpu / args.seconds
            if base is None:
                base = per_s
                ratio = "1.00x"
            else:
                ratio = f"{per_s / base:.2f}x CPU"
            xrt = f"{1.0 / per_s:,.0f}x" if per_s > 0 else "inf"
            print(f"{in_rate:>6}->{out_rate:<6}  {name:<19} {per_s * 1000:>14.3f} {xrt:>12} {ratio:>13}")
    print("'vs ttsbridge': CPU of that pipeline divided by ttsbridge's (> 1.00x means ttsbridge is cheaper).")
    turn_start_table(args.turn, max(4 * args.reps, 21))


if __name__ == "__main__":
    main()
