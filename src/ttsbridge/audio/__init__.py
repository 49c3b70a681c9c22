"""Pure audio path: G.711 codecs, streaming resampling, framing, WAV and analysis helpers.

All PCM is 16-bit signed little-endian mono ``bytes``.
"""

from __future__ import annotations

from ttsbridge.audio.g711 import (
    ENCODINGS,
    alaw_decode,
    alaw_encode,
    decode_to_pcm16,
    encode_from_pcm16,
    ulaw_decode,
    ulaw_encode,
)
from ttsbridge.audio.resample import StreamResampler, resample_oneshot

__all__ = [
    "ENCODINGS",
    "StreamResampler",
    "alaw_decode",
    "alaw_encode",
    "decode_to_pcm16",
    "encode_from_pcm16",
    "resample_oneshot",
    "ulaw_decode",
    "ulaw_encode",
]
