"""Output formats of the emulator's Kitta endpoint: ``pcm`` as is, ``wav`` and ``mp3`` through PyAV.

The page leaves the framing of ``wav`` and ``mp3`` to "concatenate audio frames in sequence order for the
selected output format", so each session's frames concatenate to one playable file:

* ``pcm``: 16-bit little-endian mono, unchanged.
* ``wav``: FFmpeg's WAV muxer writing to a non-seekable sink: the first audio frame of the session starts with
  a RIFF/WAVE header whose RIFF and data sizes are ``0xFFFFFFFF`` (the streaming convention: the length is
  not known when the header goes out), then PCM16.
* ``mp3``: libmp3lame (MPEG-2 Layer III at 24 kHz, 576 samples per frame, 64 kbit/s), encoded incrementally
  per audio frame. Each segment has its own encoder, flushed at the segment's end, so every segment's audio
  is complete before its ``usage`` and the concatenation of all frames decodes as one mp3 stream. A raw mp3
  stream carries no LAME tag, so each segment decodes with the encoder's priming delay (1105 samples) and up
  to one frame of padding.

PyAV (``av``, the ``emulator`` extra) is imported only when a ``wav``/``mp3`` session starts;
:func:`missing_codec` says why a format cannot be served.
"""

from __future__ import annotations

import fractions
from typing import Any, Protocol

import numpy as np

__all__ = ["PYAV_FORMATS", "StreamEncoder", "missing_codec", "open_encoder"]

#: Formats that need PyAV.
PYAV_FORMATS = ("wav", "mp3")
_MP3_BIT_RATE = 64_000
_INSTALL_HINT = "install PyAV: pip install 'ttsbridge[emulator]'"


class StreamEncoder(Protocol):
    """Per-session encoder: PCM16 mono in, bytes of the session's output format out."""

    def encode(self, pcm: bytes) -> bytes:
        """Encode one audio frame's PCM; may return b"" while the codec buffers."""
        ...

    def end_segment(self) -> bytes:
        """Flush what the codec holds at the end of a segment."""
        ...

    def close(self) -> None:
        """Release the codec (the session ended); nothing more is sent."""
        ...


def _import_av() -> Any:
    import av  # the `emulator` extra

    return av


def missing_codec(fmt: str) -> str | None:
    """None if ``fmt`` can be served here, else a message saying what is missing and how to install it."""
    if fmt not in PYAV_FORMATS:
        return None
    try:
        av = _import_av()
    except ImportError:
        return f"format {fmt!r} needs PyAV, which is not installed ({_INSTALL_HINT})"
    if fmt == "mp3":
        try:
            av.codec.Codec("libmp3lame", "w")
        except Exception:
            return f"format 'mp3' needs PyAV built with libmp3lame ({_INSTALL_HINT})"
    return None


class _PcmEncoder:
    def encode(self, pcm: bytes) -> bytes:
        return pcm

    def end_segment(self) -> bytes:
        return b""

    def close(self) -> None:
        pass


def _frame(av: Any, pcm: bytes, sample_rate: int, fmt: str, pts: int) -> Any:
    samples = np.frombuffer(pcm, dtype="<i2").reshape(1, -1)
    frame = av.AudioFrame.from_ndarray(samples, format=fmt, layout="mono")
    frame.sample_rate = sample_rate
    frame.pts = pts
    return frame


class _Sink:
    """A non-seekable file for FFmpeg's muxer: it collects what is written until drained."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def write(self, data: bytes) -> int:
        self.buf += data
        return len(data)

    def seekable(self) -> bool:
        return False

    def drain(self) -> bytes:
        out = bytes(self.buf)
        self.buf.clear()
        return out


class _WavEncoder:
    def __init__(self, sample_rate: int) -> None:
        self._av = _import_av()
        self._rate = sample_rate
        self._sink = _Sink()
        self._container = self._av.open(self._sink, "w", format="wav")
        self._stream = self._container.add_stream("pcm_s16le", rate=sample_rate, layout="mono")
        self._pts = 0

    def encode(self, pcm: bytes) -> bytes:
        if not pcm:
            return b""
        frame = _frame(self._av, pcm, self._rate, "s16", self._pts)
        self._pts += len(pcm) // 2
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._sink.drain()

    def end_segment(self) -> bytes:
        return self._sink.drain()

    def close(self) -> None:
        self._container.close()  # the trailer cannot patch a non-seekable stream; it is dropped
        self._sink.drain()


class _Mp3Encoder:
    def __init__(self, sample_rate: int) -> None:
        self._av = _import_av()
        self._rate = sample_rate
        self._codec: Any = None
        self._pts = 0

    def _open(self) -> Any:
        codec = self._av.CodecContext.create("libmp3lame", "w")
        codec.sample_rate = self._rate
        codec.layout = "mono"
        codec.format = "s16p"
        codec.bit_rate = _MP3_BIT_RATE
        codec.time_base = fractions.Fraction(1, self._rate)
        self._pts = 0
        return codec

    def encode(self, pcm: bytes) -> bytes:
        if not pcm:
            return b""
        if self._codec is None:
            self._codec = self._open()
        frame = _frame(self._av, pcm, self._rate, "s16p", self._pts)
        self._pts += len(pcm) // 2
        return b"".join(bytes(p) for p in self._codec.encode(frame))

    def end_segment(self) -> bytes:
        if self._codec is None:
            return b""
        codec, self._codec = self._codec, None
        return b"".join(bytes(p) for p in codec.encode(None))

    def close(self) -> None:
        self._codec = None


def open_encoder(fmt: str, sample_rate: int) -> StreamEncoder:
    """The encoder of one session. Raises RuntimeError (with :func:`missing_codec`'s message) if PyAV or
    libmp3lame is missing, ValueError for a format this module does not produce."""
    if fmt == "pcm":
        return _PcmEncoder()
    if fmt not in PYAV_FORMATS:
        raise ValueError(f"format {fmt!r}: allowed pcm, wav, mp3")
    problem = missing_codec(fmt)
    if problem:
        raise RuntimeError(problem)
    return _WavEncoder(sample_rate) if fmt == "wav" else _Mp3Encoder(sample_rate)
