"""Pure audio path: G.711 codecs, streaming resampling, framing, WAV and analysis helpers.

All PCM is 16-bit signed little-endian mono ``bytes``. Functions that take PCM16 as whole samples raise
``ValueError`` on an odd byte count; the streaming classes (``StreamResampler``, ``AudioFramer``) carry an
odd trailing byte to the next call instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttsbridge._lazy import lazy_attributes

if TYPE_CHECKING:
    from ttsbridge.audio.analysis import dominant_frequency, rms, tone
    from ttsbridge.audio.framing import AudioFramer, iter_frames, pcm_duration
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
    from ttsbridge.audio.wav import read_wav, wav_bytes, write_wav

_MODULES = {
    "analysis": ("dominant_frequency", "rms", "tone"),
    "framing": ("AudioFramer", "iter_frames", "pcm_duration"),
    "g711": (
        "ENCODINGS",
        "alaw_decode",
        "alaw_encode",
        "decode_to_pcm16",
        "encode_from_pcm16",
        "ulaw_decode",
        "ulaw_encode",
    ),
    "resample": ("StreamResampler", "resample_oneshot"),
    "wav": ("read_wav", "wav_bytes", "write_wav"),
}
# imported on first use: the resampler's users do not import the analysis helpers, nor WAV
__getattr__, __dir__ = lazy_attributes(
    __name__, {name: f"{__name__}.{mod}" for mod, names in _MODULES.items() for name in names}, globals()
)

__all__ = [
    "ENCODINGS",
    "AudioFramer",
    "StreamResampler",
    "alaw_decode",
    "alaw_encode",
    "decode_to_pcm16",
    "dominant_frequency",
    "encode_from_pcm16",
    "iter_frames",
    "pcm_duration",
    "read_wav",
    "resample_oneshot",
    "rms",
    "tone",
    "ulaw_decode",
    "ulaw_encode",
    "wav_bytes",
    "write_wav",
]
