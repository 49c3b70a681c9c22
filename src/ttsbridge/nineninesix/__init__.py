"""Nineninesix (Cartesia-compatible) TTS: wire models, sans-I/O protocol, the turn provider, the HTTP client."""

from ttsbridge.nineninesix.http import NineninesixHTTP
from ttsbridge.nineninesix.models import (
    DEFAULT_BASE_URL,
    ENCODINGS,
    MODELS,
    SAMPLE_RATES,
    NineninesixOptions,
    OutputFormat,
)
from ttsbridge.nineninesix.protocol import ERROR_CATALOG, ContextState, ErrorEffect, NineninesixProtocol
from ttsbridge.nineninesix.provider import NineninesixTurnProvider
from ttsbridge.nineninesix.wire import NineninesixProtocolError

__all__ = [
    "DEFAULT_BASE_URL",
    "ENCODINGS",
    "ERROR_CATALOG",
    "MODELS",
    "SAMPLE_RATES",
    "ContextState",
    "ErrorEffect",
    "NineninesixHTTP",
    "NineninesixOptions",
    "NineninesixProtocol",
    "NineninesixProtocolError",
    "NineninesixTurnProvider",
    "OutputFormat",
]
