"""Signal helpers for tests and diagnostics: test tones, RMS level, dominant frequency.

All take or produce PCM16 LE mono bytes. A trailing odd byte on input is ignored (half a sample).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["dominant_frequency", "rms", "to_float", "tone"]

_FULL_SCALE = 32768.0


def to_float(pcm: bytes | bytearray | memoryview) -> npt.NDArray[np.float64]:
    """PCM16 LE bytes -> float64 samples scaled to [-1, 1) (an odd trailing byte is ignored)."""
    n = len(pcm) - len(pcm) % 2
    return np.frombuffer(pcm, dtype="<i2", count=n // 2).astype(np.float64) / _FULL_SCALE


def tone(freq: float, duration_s: float, sample_rate: int, amplitude: float = 0.5) -> bytes:
    """A sine tone as PCM16 LE mono: ``round(duration_s * sample_rate)`` samples, peak ``amplitude`` of
    full scale (0..1), starting at phase 0."""
    if not 0.0 <= amplitude <= 1.0:
        raise ValueError(f"amplitude must be within [0, 1], got {amplitude!r}")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate!r}")
    n = max(0, round(duration_s * sample_rate))
    t = np.arange(n, dtype=np.float64) / sample_rate
    samples = np.round(amplitude * 32767.0 * np.sin(2.0 * np.pi * freq * t))
    return samples.astype("<i2").tobytes()


def rms(pcm: bytes | bytearray | memoryview) -> float:
    """Root-mean-square level relative to full scale: 0.0 for silence (or empty), ~0.354 for a 0.5 sine,
    1.0 max."""
    x = to_float(pcm)
    if x.size == 0:
        return 0.0
    return float(np.sqrt(np.mean(x * x)))


def dominant_frequency(pcm: bytes | bytearray | memoryview, sample_rate: int) -> float:
    """Frequency (Hz) of the strongest spectral peak (DC excluded).

    Hann window, 4x zero-padded real FFT, then quadratic interpolation of the log-magnitude around the peak
    bin; for a clean tone of 100 ms or more the error is far below 1 %. Returns 0.0 for silence; fewer than
    4 samples raise ``ValueError``.
    """
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate!r}")
    x = to_float(pcm)
    if x.size < 4:
        raise ValueError(f"need at least 4 samples to estimate a frequency, got {x.size}")
    x = x - x.mean()
    if not np.any(x):
        return 0.0
    n_fft = 1 << int(np.ceil(np.log2(x.size * 4)))
    mag = np.abs(np.fft.rfft(x * np.hanning(x.size), n=n_fft))
    k = int(np.argmax(mag[1:])) + 1
    offset = 0.0
    if 1 <= k < mag.size - 1:
        a, b, c = np.log(mag[k - 1 : k + 2] + 1e-300)
        denom = a - 2.0 * b + c
        if denom < 0.0:
            offset = float(np.clip(0.5 * (a - c) / denom, -0.5, 0.5))
    return (k + offset) * sample_rate / n_fft
