"""Kitta Realtime TTS v2 option values, as ``Literal`` types (validated up front by the plugin)."""

from __future__ import annotations

from typing import Literal

TTSModels = Literal["fishaudio-s21pro-flash", "minimax-speech", "qwen-tts"]
"""Models of the capability matrix; each accepts its own set of optional fields (see docs/kitta.md)."""

TTSLatency = Literal["normal", "balanced"]

DEFAULT_MODEL: TTSModels = "fishaudio-s21pro-flash"
DEFAULT_BASE_URL = "wss://realtime.fishaudio.org"
DEFAULT_SAMPLE_RATE = 24000
