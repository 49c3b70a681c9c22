"""WAV (RIFF, PCM16) read/write for PCM16 LE bytes, over the stdlib :mod:`wave`."""

from __future__ import annotations

import io
import os
import wave
from typing import BinaryIO

import numpy as np

__all__ = ["read_wav", "wav_bytes", "write_wav"]


def _write(target: str | os.PathLike[str] | BinaryIO, pcm: bytes, sample_rate: int, channels: int) -> None:
    if channels < 1:
        raise ValueError(f"channels must be >= 1, got {channels!r}")
    if len(pcm) % (2 * channels):
        raise ValueError(f"PCM16 data of {len(pcm)} bytes is not a whole number of {channels}-channel frames")
    with wave.open(target if not isinstance(target, os.PathLike) else os.fspath(target), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)


def wav_bytes(pcm: bytes | bytearray | memoryview, sample_rate: int, channels: int = 1) -> bytes:
    """Wrap PCM16 LE (interleaved when ``channels > 1``) in a WAV container and return the file bytes."""
    buf = io.BytesIO()
    _write(buf, bytes(pcm), sample_rate, channels)
    return buf.getvalue()


def write_wav(path: str | os.PathLike[str], pcm: bytes | bytearray | memoryview, sample_rate: int) -> None:
    """Write mono PCM16 LE to a WAV file at ``path``."""
    _write(path, bytes(pcm), sample_rate, 1)


def read_wav(path_or_bytes: str | os.PathLike[str] | bytes | bytearray | BinaryIO) -> tuple[bytes, int]:
    """Read a 16-bit PCM WAV (path, file bytes or binary file object); return ``(pcm16_mono, sample_rate)``.

    Multi-channel files are downmixed to mono (mean of channels). Non-16-bit files raise ``ValueError``.
    """
    src: str | BinaryIO
    if isinstance(path_or_bytes, (bytes, bytearray)):
        src = io.BytesIO(path_or_bytes)
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        src = os.fspath(path_or_bytes)
    else:
        src = path_or_bytes
    try:
        with wave.open(src, "rb") as w:
            width, channels, rate = w.getsampwidth(), w.getnchannels(), w.getframerate()
            if width != 2:
                raise ValueError(f"only 16-bit PCM WAV is supported, got {8 * width}-bit")
            data = w.readframes(w.getnframes())
    except wave.Error as exc:
        raise ValueError(f"not a readable PCM WAV: {exc}") from exc
    if channels > 1:
        frames = np.frombuffer(data, dtype="<i2").reshape(-1, channels)
        data = np.round(frames.mean(axis=1)).astype("<i2").tobytes()
    return data, rate
