"""Kitta Realtime TTS v2 endpoint of the emulator (``/v2/tts/live``). Placeholder: filled in by the Kitta work."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass
class KittaConfig:
    """Knobs of the Kitta endpoint."""

    auth_timeout_s: float = 5.0


def setup_kitta_routes(app: web.Application, emulator: Any) -> None:
    """Add ``/v2/tts/live`` to the emulator's app. ``emulator`` is the running Emulator (config, stats, voices)."""
