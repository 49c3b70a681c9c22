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

import numpy as np

from ttsbridge.audio import AudioFramer, StreamResampler, resample_oneshot, ulaw_decode, ulaw_encode

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="audio length per pass (default 10)")
    parser.add_argument("--reps", type=int, default=7, help="repetitions; the median is reported (default 7)")
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


if __name__ == "__main__":
    main()
