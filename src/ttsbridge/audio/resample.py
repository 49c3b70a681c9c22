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
makes every turn bit-reproducible.

Turn start ("head"): ``soxr.ResampleStream`` works in internal blocks much longer than its filter, so the
first chunk of a turn often yields no output at all (float32, 40 ms chunks: HQ 22050->24000 gives 0, 1781,
893, ... samples; 20 ms chunks, HQ 8000->48000: nothing for 7 chunks). So while the stream has not yet
produced more than has been returned, ``process()`` also resamples the turn's input so far in one shot
(``soxr.resample``, same quality, float32) and returns the part not returned yet, minus the last ``K``
output samples: those are still within the filter's reach of input not seen yet, which the one-shot takes
as zeros. ``K`` is ``_HEAD_REACH[quality]`` samples at ``min(in_rate, out_rate)`` scaled to the output rate
(HQ: 100, i.e. 22050->24000: 109 samples = 4.5 ms; 8000->24000: 300 = 12.5 ms). The stream is fed as usual
and its first ``M`` output samples (``M`` = what the one-shots returned) are dropped; as soon as it has
produced more than ``M``, the turn continues on the stream alone. Per-turn output length and sample
alignment are unchanged. A first chunk shorter than the filter's reach (e.g. 10 ms at 8 kHz in HQ) can
still give nothing; the audio then comes with the next chunk.

Accuracy of the turn start: up to the cut the one-shot and the stream apply the same filter to the same
input. What is left out, the filter taps on inputs beyond the cut, sums (in absolute value, times full
scale) to < 0.1 LSB for the rate pairs in the tests; float32 round-off (the two paths split their FFT
blocks differently) adds <= 0.02 LSB (measured). After rounding to int16 a turn therefore equals the
stream-only output (= one-shot of the whole turn) within 1 LSB, on the few early samples whose exact value
lies next to a rounding boundary (measured: 0-31 samples per turn, none at the join); everything from the
join on is bit-identical.

Cost: one ``soxr.resample`` (0.1-0.4 ms, mostly filter design) per chunk, only during a turn's start and
only when it adds >= 2.5 ms of audio, at most ``_MAX_HEAD_FILLS`` per turn (HQ, 20 ms chunks: 1-7 per
turn); after that ``process()`` costs what the bare stream costs.

Steady-state jitter is not smoothed: within a turn the stream still emits in blocks (e.g. HQ 8000->24000
with 40 ms chunks emits 1468 samples on about two chunks out of three; HQ 8000->48000 with 20 ms chunks one
block per 6-7 chunks). Filling those gaps the same way would cost a one-shot (filter design) on most
chunks, 5-20x the bare per-chunk cost, so it is left to the consumer's playout buffer (the average rate
is exact; nothing is lost or reordered). Note that starting early lowers the reserve a real-time-paced
consumer has against that jitter; sources faster than real time (TTS usually is) are unaffected.
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
    """float32 samples in int16 units -> PCM16 LE bytes (round half to even, clip to int16 range).

    In place (``samples`` is the resampler's fresh output, used once) and with the ufuncs themselves:
    ``np.clip`` goes through a Python wrapper, a few µs per chunk."""
    if not samples.flags.writeable:
        samples = samples.copy()
    np.rint(samples, out=samples)
    np.maximum(samples, -32768.0, out=samples)
    np.minimum(samples, 32767.0, out=samples)
    return samples.astype(_PCM16).tobytes()


#: Reach of each quality's filter towards future input, in samples at ``min(in_rate, out_rate)``: beyond
#: it the absolute sum of the remaining coefficients times full scale is < 0.1 LSB. Measured from impulse
#: responses (rates 8000-48000, up and down): QQ <= 2.2, LQ <= 22, MQ <= 84, HQ <= 96, VHQ <= 115.
_HEAD_REACH: Final[dict[str, int]] = {"QQ": 4, "LQ": 26, "MQ": 88, "HQ": 100, "VHQ": 120}

#: Turn start: at most this many one-shot fills per turn, each adding at least ``_MIN_FILL_S`` of output.
_MAX_HEAD_FILLS: Final = 16
_MIN_FILL_S: Final = 0.0025


def _head_margin(in_rate: int, out_rate: int, quality: str) -> int:
    """Output samples at the end of a one-shot resample still within the filter's reach of later input."""
    return -(-_HEAD_REACH[quality] * out_rate // min(in_rate, out_rate))  # ceil


class _Head:
    """Turn-start state: the turn's input so far, and how far the one-shot output ran ahead of the stream."""

    __slots__ = ("chunks", "emitted", "fills", "n_in", "stream_out")

    def __init__(self) -> None:
        self.chunks: list[np.ndarray] = []
        self.n_in = 0  # input samples in ``chunks``
        self.emitted = 0  # output samples returned so far this turn (all from one-shots while in the head)
        self.stream_out = 0  # output samples the stream has produced so far this turn (all dropped so far)
        self.fills = 0


class StreamResampler:
    """Stateful PCM16 mono resampler for streamed audio, ``in_rate`` -> ``out_rate`` (soxr stream).

    The first ``process()`` of a turn returns audio as soon as there is any the filter can compute (see the
    module docstring: turn start); the concatenated output of a turn is the same as before.

    When ``in_rate == out_rate`` the resampler is a passthrough: no soxr, bytes come back as they are (an
    odd trailing byte is still carried, so output is always whole samples) and ``flush()`` returns ``b""``.
    """

    __slots__ = (
        "_carry",
        "_head",
        "_in_rate",
        "_margin",
        "_min_fill",
        "_n_in",
        "_n_out",
        "_out_rate",
        "_quality",
        "_stream",
    )

    def __init__(self, in_rate: int, out_rate: int, *, quality: str = "HQ") -> None:
        self._in_rate = _check_rate("in_rate", in_rate)
        self._out_rate = _check_rate("out_rate", out_rate)
        if quality not in QUALITIES:
            raise ValueError(f"unknown quality {quality!r}; allowed values: {', '.join(QUALITIES)}")
        self._quality = quality
        self._carry = b""
        self._margin = _head_margin(in_rate, out_rate, quality)
        self._min_fill = max(1, round(out_rate * _MIN_FILL_S))
        self._stream: soxr.ResampleStream | None = None
        self._head: _Head | None = None
        self._n_in = self._n_out = 0  # samples in and out this turn (resampling only): see max_input()
        self._new_turn()

    def _new_turn(self) -> None:
        # A fresh stream per turn (~0.1 ms) rather than ``ResampleStream.clear()``, so that every turn
        # starts from exactly the same state as a new resampler.
        self._n_in = self._n_out = 0
        if self._in_rate == self._out_rate:
            return
        self._stream = soxr.ResampleStream(
            self._in_rate, self._out_rate, 1, dtype="float32", quality=self._quality
        )
        self._head = _Head()

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
        if self._stream is None and not self._carry and type(pcm) is bytes and not len(pcm) & 1:
            return pcm  # passthrough of whole samples (every chunk at the wire's own rate): no copy
        data = self._whole_samples(pcm)
        if self._stream is None:
            return bytes(data)
        if not data:
            return b""
        x = _to_float(data)
        out = self._stream.resample_chunk(x)
        if self._head is not None:
            out = self._head_step(x, out)
        self._n_in += x.size
        self._n_out += out.size
        return _to_bytes(out)

    def max_input(self, max_bytes: int) -> int:
        """The most input bytes whose :meth:`process` is sure to return at most ``max_bytes`` (even, >= 0).

        The output of a turn never runs ahead of its input: after ``n`` input samples at most
        ``ceil(n * out_rate / in_rate)`` have been returned (soxr's stream is causal, and the turn-start
        one-shots keep a margin), so what one more call can return is bounded by what the input so far
        owes and has not returned yet. Exact for a passthrough. Used to bound coalesced frames.
        """
        limit = max(0, max_bytes) // 2  # output samples
        if self._stream is None:
            return max(0, 2 * limit - len(self._carry))
        # ceil((n_in + t) * out / in) - n_out <= limit  <=>  (n_in + t) * out <= (limit + n_out) * in
        t = (limit + self._n_out) * self._in_rate // self._out_rate - self._n_in
        return max(0, 2 * t - len(self._carry))

    def _head_step(self, x: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Turn start: the stream's output beyond what the one-shots returned, or the next one-shot part."""
        head = self._head
        assert head is not None
        produced = head.stream_out + out.size
        if produced > head.emitted:  # the stream has caught up: continue on it alone
            self._head = None
            return out[head.emitted - head.stream_out :]
        head.stream_out = produced  # everything it produced was already emitted
        if head.fills >= _MAX_HEAD_FILLS:  # out of budget: wait for the stream to catch up
            head.chunks.clear()
            return out[:0]
        head.chunks.append(x)
        head.n_in += x.size
        owed = head.n_in * self._out_rate // self._in_rate - self._margin
        if owed - head.emitted < self._min_fill:
            return out[:0]
        if len(head.chunks) > 1:
            head.chunks = [np.concatenate(head.chunks)]
        full = soxr.resample(head.chunks[0], self._in_rate, self._out_rate, quality=self._quality)
        part = full[head.emitted : full.size - self._margin]
        head.emitted += part.size
        head.fills += 1
        return part

    def flush(self) -> bytes:
        """End the turn: emit the filter tail and get ready for a new turn.

        A carried odd byte (half a sample) is dropped. Passthrough returns ``b""``.
        """
        self._carry = b""
        if self._stream is None:
            return b""
        if self._stream.delay() > 0:
            out = self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True)
        else:
            # Nothing pending. (Also works around python-soxr 1.0: ``last=True`` with a slightly negative
            # delay, seen with QQ e.g. 48000->22050 after 960 samples, raises ``MemoryError``.)
            out = np.zeros(0, dtype=np.float32)
        head = self._head
        if head is not None:  # drop what the one-shots already emitted
            out = out[max(0, head.emitted - head.stream_out) :]
        self._new_turn()
        return _to_bytes(out)

    def reset(self) -> None:
        """Drop all state (pending filter input/output and any carried byte), e.g. after barge-in."""
        self._carry = b""
        self._new_turn()

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
