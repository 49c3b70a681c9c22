"""Local emulator of the Nineninesix (Cartesia-compatible) API and the Kitta Realtime v2 endpoint.

It is the test server of this package, an offline demo and a product feature::

    from ttsbridge.emulator import Emulator, EmulatorConfig, Fault, TONE_VOICE_ID, tone_frequency

    async with Emulator(EmulatorConfig(realtime_factor=1.0)) as emu:
        ...  # emu.base_url, emu.ws_url, emu.api_key, emu.stats, emu.add_fault(Fault(...))

It stands apart from the clients: nothing here imports ``ttsbridge.nineninesix`` or ``ttsbridge.kitta``.
"""

from __future__ import annotations

from ttsbridge.emulator.config import DEFAULT_API_KEY, MODEL_ID, NATIVE_SAMPLE_RATE, EmulatorConfig
from ttsbridge.emulator.nineninesix.faults import ERROR_CATALOG, ErrorSpec, Fault, parse_inband
from ttsbridge.emulator.server import Emulator, build_app, run_forever, serve
from ttsbridge.emulator.stats import EmulatorStats
from ttsbridge.emulator.voices import (
    EXAMPLE_VOICE_ID,
    KITTA_EXAMPLE_MODEL,
    KITTA_EXAMPLE_VOICE_ID,
    SPEECH_VOICE_ID,
    TONE_VOICE_ID,
    VoiceNotFoundError,
    VoiceRegistry,
    speech_available,
    synthesize,
    tone_duration,
    tone_frequency,
    tone_pcm,
)

__all__ = [
    "DEFAULT_API_KEY",
    "ERROR_CATALOG",
    "EXAMPLE_VOICE_ID",
    "KITTA_EXAMPLE_MODEL",
    "KITTA_EXAMPLE_VOICE_ID",
    "MODEL_ID",
    "NATIVE_SAMPLE_RATE",
    "SPEECH_VOICE_ID",
    "TONE_VOICE_ID",
    "Emulator",
    "EmulatorConfig",
    "EmulatorStats",
    "ErrorSpec",
    "Fault",
    "VoiceNotFoundError",
    "VoiceRegistry",
    "build_app",
    "parse_inband",
    "run_forever",
    "serve",
    "speech_available",
    "synthesize",
    "tone_duration",
    "tone_frequency",
    "tone_pcm",
]
