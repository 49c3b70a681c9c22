"""Nineninesix option values, as ``Literal`` types (the API validates them; so does the plugin, up front)."""

from __future__ import annotations

from typing import Literal

TTSModels = Literal["gepard-1.0"]
"""The only model the API has."""

TTSEncoding = Literal["pcm_s16le", "pcm_mulaw", "pcm_alaw"]
"""Encoding on the wire. LiveKit always receives PCM16: μ-law and A-law are decoded by the plugin."""

TTSWireSampleRate = Literal[8000, 16000, 22050]
"""Rates the API serves (22050 is native; 8000 and 16000 are resampled by the server)."""

DEFAULT_MODEL: TTSModels = "gepard-1.0"
DEFAULT_BASE_URL = "https://api.nineninesix.ai"
DEFAULT_SAMPLE_RATE = 24000
