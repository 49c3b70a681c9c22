"""Kitta Realtime TTS v2 option values, as ``Literal`` types (validated up front by the plugin).

The values live in one place, :mod:`ttsbridge.kitta.models` (``MODEL_CAPABILITIES``, ``LATENCIES``,
``DEFAULT_MODEL``, ``DEFAULT_BASE_URL``); the ``Literal``\\ s below spell them for type checkers, and
``tests/livekit/test_plugin_models.py`` keeps them in step.
"""

from __future__ import annotations

from typing import Literal

from ttsbridge.kitta.models import DEFAULT_BASE_URL, DEFAULT_MODEL, DISPLAY_NAME
from ttsbridge.livekit import DEFAULT_SAMPLE_RATE

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_MODEL",
    "DEFAULT_SAMPLE_RATE",
    "DISPLAY_NAME",
    "TTSLatency",
    "TTSModels",
]

TTSModels = Literal["fishaudio-s21pro-flash", "minimax-speech", "qwen-tts"]
"""Models of the capability matrix; each accepts its own set of optional fields (see docs/kitta.md)."""

TTSLatency = Literal["normal", "balanced"]
