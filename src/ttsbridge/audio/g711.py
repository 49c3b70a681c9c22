"""ITU-T G.711 μ-law and A-law codecs over PCM16 little-endian mono bytes.

Numpy-vectorised and bit-exact to ITU-T G.711 as implemented by CPython's ``audioop`` (``lin2ulaw``,
``ulaw2lin``, ``lin2alaw``, ``alaw2lin``; removed from the stdlib in Python 3.13):

* decode uses a 256-entry ``int16`` lookup table per law;
* encode uses a 65536-entry ``uint8`` lookup table per law, indexed by the raw 16-bit sample. Both tables
  are built once at import time by a vectorised implementation of the reference algorithm.

PCM16 input must hold whole samples: an odd byte count raises :class:`ValueError`. Streaming callers carry
an odd trailing byte themselves (``StreamResampler`` and ``AudioFramer`` do) and pass whole samples here.
Encoded (8-bit) input has no alignment constraint.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt

__all__ = [
    "ENCODINGS",
    "alaw_decode",
    "alaw_encode",
    "decode_to_pcm16",
    "encode_from_pcm16",
    "ulaw_decode",
    "ulaw_encode",
]

#: Encodings understood by :func:`decode_to_pcm16` / :func:`encode_from_pcm16`.
ENCODINGS: Final[tuple[str, ...]] = ("pcm_s16le", "pcm_mulaw", "pcm_alaw")

_PCM16: Final = np.dtype("<i2")

# G.711 reference constants (as in the ITU-T / Sun reference code used by audioop).
_ULAW_BIAS: Final = 0x84
_ULAW_CLIP: Final = 8159  # magnitude clip in the 14-bit domain
_SEG_UEND: Final = np.array([0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF], dtype=np.int32)
_SEG_AEND: Final = np.array([0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF], dtype=np.int32)


def _ulaw_encode_array(samples: npt.NDArray[np.int16]) -> npt.NDArray[np.uint8]:
    """Vectorised G.711 μ-law encoder (16-bit linear in, 8-bit codes out)."""
    pcm = samples.astype(np.int32) >> 2  # 14-bit, arithmetic shift (as audioop)
    negative = pcm < 0
    mask = np.where(negative, 0x7F, 0xFF)
    mag = np.minimum(np.abs(pcm), _ULAW_CLIP) + (_ULAW_BIAS >> 2)
    seg = np.searchsorted(_SEG_UEND, mag, side="left")  # first i with mag <= end[i]
    uval = (seg << 4) | ((mag >> (seg + 1)) & 0xF)
    uval = np.where(seg >= 8, 0x7F, uval)
    return (uval ^ mask).astype(np.uint8)


def _alaw_encode_array(samples: npt.NDArray[np.int16]) -> npt.NDArray[np.uint8]:
    """Vectorised G.711 A-law encoder (16-bit linear in, 8-bit codes out)."""
    pcm = samples.astype(np.int32) >> 3  # 13-bit, arithmetic shift (as audioop)
    negative = pcm < 0
    mask = np.where(negative, 0x55, 0xD5)
    mag = np.where(negative, -pcm - 1, pcm)
    seg = np.searchsorted(_SEG_AEND, mag, side="left")
    shift = np.where(seg < 2, 1, seg)
    aval = (seg << 4) | ((mag >> shift) & 0xF)
    aval = np.where(seg >= 8, 0x7F, aval)
    return (aval ^ mask).astype(np.uint8)


def _ulaw_decode_array(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.int16]:
    """Vectorised G.711 μ-law decoder (8-bit codes in, 16-bit linear out)."""
    u = (~codes.astype(np.int32)) & 0xFF
    t = (((u & 0x0F) << 3) + _ULAW_BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, _ULAW_BIAS - t, t - _ULAW_BIAS).astype(np.int16)


def _alaw_decode_array(codes: npt.NDArray[np.uint8]) -> npt.NDArray[np.int16]:
    """Vectorised G.711 A-law decoder (8-bit codes in, 16-bit linear out)."""
    a = codes.astype(np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    t = np.where(seg == 0, t + 8, t + 0x108)
    t = np.where(seg >= 2, t << np.maximum(seg - 1, 0), t)
    return np.where(a & 0x80, t, -t).astype(np.int16)


# Lookup tables. Encode tables are indexed by the sample's bit pattern read as uint16.
_ALL_SAMPLES: Final = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.int16)
_ALL_CODES: Final = np.arange(256, dtype=np.uint8)
_ULAW_ENC: Final = _ulaw_encode_array(_ALL_SAMPLES)
_ALAW_ENC: Final = _alaw_encode_array(_ALL_SAMPLES)
_ULAW_DEC: Final = _ulaw_decode_array(_ALL_CODES).astype(_PCM16)
_ALAW_DEC: Final = _alaw_decode_array(_ALL_CODES).astype(_PCM16)
for _table in (_ULAW_ENC, _ALAW_ENC, _ULAW_DEC, _ALAW_DEC):
    _table.flags.writeable = False


def _pcm16_indices(pcm: bytes | bytearray | memoryview) -> npt.NDArray[np.uint16]:
    n = len(pcm) if not isinstance(pcm, memoryview) else pcm.nbytes
    if n % 2:
        raise ValueError(
            f"PCM16 input must hold whole 2-byte samples, got {n} bytes; carry the odd trailing byte "
            "to the next chunk"
        )
    return np.frombuffer(pcm, dtype="<u2")


def ulaw_encode(pcm: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 LE mono to G.711 μ-law (one byte per sample). Odd byte count -> ``ValueError``."""
    return _ULAW_ENC[_pcm16_indices(pcm)].tobytes()


def alaw_encode(pcm: bytes | bytearray | memoryview) -> bytes:
    """Encode PCM16 LE mono to G.711 A-law (one byte per sample). Odd byte count -> ``ValueError``."""
    return _ALAW_ENC[_pcm16_indices(pcm)].tobytes()


def ulaw_decode(data: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 μ-law bytes to PCM16 LE mono (two bytes per input byte)."""
    return _ULAW_DEC[np.frombuffer(data, dtype=np.uint8)].tobytes()


def alaw_decode(data: bytes | bytearray | memoryview) -> bytes:
    """Decode G.711 A-law bytes to PCM16 LE mono (two bytes per input byte)."""
    return _ALAW_DEC[np.frombuffer(data, dtype=np.uint8)].tobytes()


def _check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; allowed values: {', '.join(ENCODINGS)}")


def decode_to_pcm16(data: bytes | bytearray | memoryview, encoding: str) -> bytes:
    """Decode ``data`` in ``encoding`` (one of :data:`ENCODINGS`) to PCM16 LE mono.

    ``pcm_s16le`` is a passthrough (returned as ``bytes``) but must hold whole samples (odd length ->
    ``ValueError``). Unknown encodings raise ``ValueError`` naming the allowed values.
    """
    _check_encoding(encoding)
    if encoding == "pcm_mulaw":
        return ulaw_decode(data)
    if encoding == "pcm_alaw":
        return alaw_decode(data)
    _pcm16_indices(data)  # validates whole samples
    return bytes(data)


def encode_from_pcm16(pcm: bytes | bytearray | memoryview, encoding: str) -> bytes:
    """Encode PCM16 LE mono into ``encoding`` (one of :data:`ENCODINGS`); ``pcm_s16le`` is a passthrough.

    Odd byte count -> ``ValueError``; unknown encodings raise ``ValueError`` naming the allowed values.
    """
    _check_encoding(encoding)
    if encoding == "pcm_mulaw":
        return ulaw_encode(pcm)
    if encoding == "pcm_alaw":
        return alaw_encode(pcm)
    _pcm16_indices(pcm)
    return bytes(pcm)
