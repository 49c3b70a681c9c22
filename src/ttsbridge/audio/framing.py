"""Fixed-size framing of streamed PCM16 LE mono bytes.

:class:`AudioFramer` turns arbitrarily sized chunks into frames of exactly ``frame_bytes`` bytes
(``frame_ms`` of audio, whole samples). Whatever does not fill a frame, including an odd trailing byte, is
carried to the next :meth:`~AudioFramer.push`. :meth:`~AudioFramer.flush` returns the final partial frame
(whole samples only; a lone odd byte is half a sample and is dropped) or ``None`` - never an empty frame.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["AudioFramer", "iter_frames", "pcm_duration"]

_SAMPLE_BYTES = 2


def _frame_samples(sample_rate: int, frame_ms: float) -> int:
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
        raise ValueError(f"sample_rate must be a positive int (Hz), got {sample_rate!r}")
    if not frame_ms > 0:
        raise ValueError(f"frame_ms must be > 0, got {frame_ms!r}")
    samples = round(sample_rate * frame_ms / 1000.0)
    if samples < 1:
        raise ValueError(f"frame_ms={frame_ms!r} at {sample_rate} Hz is shorter than one sample")
    return samples


class AudioFramer:
    """Re-chunk a PCM16 mono stream into fixed ``frame_ms`` frames (``round(rate*ms/1000)`` samples)."""

    __slots__ = ("_buf", "_frame_bytes", "_frame_ms", "_sample_rate")

    def __init__(self, sample_rate: int, frame_ms: float = 20.0) -> None:
        self._frame_bytes = _frame_samples(sample_rate, frame_ms) * _SAMPLE_BYTES
        self._sample_rate = sample_rate
        self._frame_ms = frame_ms
        self._buf = bytearray()

    @property
    def frame_bytes(self) -> int:
        """Size of every full frame in bytes (always even)."""
        return self._frame_bytes

    @property
    def sample_rate(self) -> int:
        return self._sample_rate

    @property
    def frame_ms(self) -> float:
        return self._frame_ms

    @property
    def pending(self) -> int:
        """Bytes buffered and not yet returned as a frame."""
        return len(self._buf)

    def push(self, pcm: bytes | bytearray | memoryview) -> list[bytes]:
        """Add a chunk; return all full frames now available (possibly none)."""
        self._buf += pcm
        size = self._frame_bytes
        n_full = len(self._buf) // size
        if n_full == 0:
            return []
        end = n_full * size
        view = bytes(self._buf[:end])
        del self._buf[:end]
        return [view[i : i + size] for i in range(0, end, size)]

    def flush(self) -> bytes | None:
        """Return the remaining partial frame (whole samples) and clear; ``None`` when nothing is left."""
        usable = len(self._buf) - len(self._buf) % _SAMPLE_BYTES
        rest = bytes(self._buf[:usable])
        self._buf.clear()
        return rest or None

    def reset(self) -> None:
        """Drop any buffered bytes."""
        self._buf.clear()

    def __repr__(self) -> str:
        return (
            f"AudioFramer(sample_rate={self._sample_rate}, frame_ms={self._frame_ms}, "
            f"frame_bytes={self._frame_bytes}, pending={len(self._buf)})"
        )


def iter_frames(
    pcm: bytes | bytearray | memoryview, sample_rate: int, frame_ms: float = 20.0
) -> Iterator[bytes]:
    """Yield full ``frame_ms`` frames of ``pcm`` then the final partial frame if any (never empty)."""
    framer = AudioFramer(sample_rate, frame_ms)
    yield from framer.push(pcm)
    rest = framer.flush()
    if rest is not None:
        yield rest


def pcm_duration(pcm_bytes_len: int, sample_rate: int) -> float:
    """Duration in seconds of ``pcm_bytes_len`` bytes of PCM16 mono at ``sample_rate``."""
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be > 0, got {sample_rate!r}")
    return (pcm_bytes_len // _SAMPLE_BYTES) / sample_rate
