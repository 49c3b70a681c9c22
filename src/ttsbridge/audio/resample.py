"""Streaming and one-shot resampling of PCM16 little-endian mono bytes (libsoxr via ``soxr``).

`StreamResampler` wraps ``soxr.ResampleStream`` (mono, PCM16 in and out). One instance serves one stream
of turns: ``process()`` every chunk of a turn (state is carried across chunks, so chunk boundaries add no
clicks), ``flush()`` at the end of the turn to emit the filter tail, or ``reset()`` to drop everything (e.g.
after barge-in). After ``flush()`` or ``reset()`` the resampler is ready for a new turn.

Chunks may have any byte length: an odd trailing byte is carried to the next ``process()`` call, and the
output always holds whole samples (even byte count).

Determinism: libsoxr's ``int16`` output path adds TPDF dither seeded from the clock and the object's address,
so the same input gives outputs differing by up to 2 LSB from run to run. Both the streaming and one-shot
paths therefore run soxr in ``float32`` on the int16 sample values and round/clip back to int16 here, which
makes every turn bit-reproducible (streamed output, flushed, matches one-shot output sample for sample in
the tests).
"""

from __future__ import annotations

from typing import Final

import numpy as np
import soxr

__all__ = ["QUALITIES", "StreamResampler", "resample_oneshot"]

#: libsoxr quality presets accepted by :class:`StreamResampler`.
QUALITIES: Final[tuple[str, ...]] = ("QQ", "LQ", "MQ", "HQ", "VHQ")

_PCM16: Final = np.dtype("<i2")


def _check_rate(name: str, rate: int) -> int:
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise ValueError(f"{name} must be a positive int (Hz), got {rate!r}")
    return rate


def _to_float(pcm: bytes | bytearray | memoryview) -> np.ndarray:
    return np.frombuffer(pcm, dtype=_PCM16).astype(np.float32)


def _to_bytes(samples: np.ndarray) -> bytes:
    """float32 samples in int16 units -> PCM16 LE bytes (round half to even, clip to int16 range)."""
    return np.clip(np.rint(samples), -32768.0, 32767.0).astype(_PCM16).tobytes()


class StreamResampler:
    """Stateful PCM16 mono resampler for streamed audio, ``in_rate`` -> ``out_rate`` (soxr stream).

    When ``in_rate == out_rate`` the resampler is a passthrough: no soxr, bytes come back as they are (an
    odd trailing byte is still carried, so output is always whole samples) and ``flush()`` returns ``b""``.
    """

    __slots__ = ("_carry", "_in_rate", "_out_rate", "_quality", "_stream")

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        self._in_rate = _check_rate("in_rate", in_rate)
        self._out_rate = _check_rate("out_rate", out_rate)
        if quality not in QUALITIES:
            raise ValueError(f"unknown quality {quality!r}; allowed values: {', '.join(QUALITIES)}")
        self._quality = quality
        self._carry = b""
        self._stream: soxr.ResampleStream | None = self._new_stream()

    def _new_stream(self) -> soxr.ResampleStream | None:
        # A fresh stream per turn (~0.1 ms) rather than ``ResampleStream.clear()``, so that every turn
        # starts from exactly the same state as a new resampler.
        if self._in_rate == self._out_rate:
            return None
        return soxr.ResampleStream(self._in_rate, self._out_rate, 1, dtype="float32", quality=self._quality)

    @property
    def in_rate(self) -> int:
        return self._in_rate

    @property
    def out_rate(self) -> int:
        return self._out_rate

    @property
    def quality(self) -> str:
        return self._quality

    @property
    def passthrough(self) -> bool:
        """True when ``in_rate == out_rate`` (no resampling)."""
        return self._stream is None

    def _whole_samples(self, pcm: bytes | bytearray | memoryview) -> bytes | bytearray | memoryview:
        """Prepend the carried byte, split off (and carry) a new odd trailing byte."""
        if self._carry:
            pcm = self._carry + bytes(pcm)
            self._carry = b""
        n = len(pcm) if not isinstance(pcm, memoryview) else pcm.nbytes
        if n % 2:
            self._carry = bytes(pcm[n - 1 : n])
            pcm = pcm[: n - 1]
        return pcm

    def process(self, pcm: bytes | bytearray | memoryview) -> bytes:
        """Resample one chunk of a turn; returns whole PCM16 samples (possibly ``b""``)."""
        data = self._whole_samples(pcm)
        if self._stream is None:
            return bytes(data)
        if not data:
            return b""
        out = self._stream.resample_chunk(_to_float(data))
        return _to_bytes(out)

    def flush(self) -> bytes:
        """End the turn: emit the filter tail and get ready for a new turn.

        A carried odd byte (half a sample) is dropped. Passthrough returns ``b""``.
        """
        self._carry = b""
        if self._stream is None:
            return b""
        out = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        self._stream = self._new_stream()
        return _to_bytes(out)

    def reset(self) -> None:
        """Drop all state (pending filter input/output and any carried byte), e.g. after barge-in."""
        self._carry = b""
        if self._stream is not None:
            self._stream = self._new_stream()

    def __repr__(self) -> str:
        return (
            f"StreamResampler(in_rate={self._in_rate}, out_rate={self._out_rate}, "
            f"quality={self._quality!r}, passthrough={self.passthrough})"
        )


def resample_oneshot(pcm: bytes | bytearray | memoryview, in_rate: int, out_rate: int) -> bytes:
    """Resample a whole PCM16 LE mono buffer at once (soxr HQ). Odd byte count -> ``ValueError``.

    Same rates return the input unchanged (as ``bytes``).
    """
    _check_rate("in_rate", in_rate)
    _check_rate("out_rate", out_rate)
    n = len(pcm) if not isinstance(pcm, memoryview) else pcm.nbytes
    if n % 2:
        raise ValueError(f"PCM16 input must hold whole 2-byte samples, got {n} bytes")
    if in_rate == out_rate or n == 0:
        return bytes(pcm)
    out = soxr.resample(_to_float(pcm), in_rate, out_rate, quality="HQ")
    return _to_bytes(out)
