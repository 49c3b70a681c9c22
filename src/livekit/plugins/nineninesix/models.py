"""Nineninesix option values, as ``Literal`` types (the API validates them; so does the plugin, up front).

The values themselves live in one place, :mod:`ttsbridge.nineninesix.models`; these are its names as
LiveKit's plugins spell them.
"""

from __future__ import annotations

from ttsbridge.livekit import DEFAULT_SAMPLE_RATE
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, DEFAULT_MODEL, DISPLAY_NAME
from ttsbridge.nineninesix.models import Encoding as TTSEncoding
from ttsbridge.nineninesix.models import Model as TTSModels
from ttsbridge.nineninesix.models import WireSampleRate as TTSWireSampleRate

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_SAMPLE_RATE",
    "DISPLAY_NAME",
    "TTSEncoding",
    "TTSModels",
    "TTSWireSampleRate",
]
# TTSModels: the only model the API has. TTSEncoding: encoding on the wire; LiveKit always receives PCM16
# (μ-law and A-law are decoded by the plugin). TTSWireSampleRate: rates the API serves (22050 is native;
# 8000 and 16000 are resampled by the server).
