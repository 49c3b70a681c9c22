"""Kitta Realtime TTS v2 (MessagePack over one WebSocket per generation).

* :mod:`~ttsbridge.kitta.models`: wire models and :class:`KittaOptions`.
* :mod:`~ttsbridge.kitta.protocol`: the sans-I/O session state machine.
* :mod:`~ttsbridge.kitta.client`: the asyncio client (:class:`KittaClient`, :class:`KittaGeneration`).
* :mod:`~ttsbridge.kitta.provider`: :class:`KittaTurnProvider` for the framework adapters.
"""

from __future__ import annotations

from ttsbridge.kitta.client import KittaAudio, KittaClient, KittaGeneration, KittaSession, build_url
from ttsbridge.kitta.models import (
    DEFAULT_BASE_URL,
    MODEL_CAPABILITIES,
    SUBPROTOCOL,
    KittaLimits,
    KittaOptions,
)
from ttsbridge.kitta.protocol import (
    KittaConnectionClosed,
    KittaLimitError,
    KittaProtocol,
    KittaProtocolError,
    State,
    split_text,
)
from ttsbridge.kitta.provider import KittaTurn, KittaTurnProvider

__all__ = [
    "DEFAULT_BASE_URL",
    "MODEL_CAPABILITIES",
    "SUBPROTOCOL",
    "KittaAudio",
    "KittaClient",
    "KittaConnectionClosed",
    "KittaGeneration",
    "KittaLimitError",
    "KittaLimits",
    "KittaOptions",
    "KittaProtocol",
    "KittaProtocolError",
    "KittaSession",
    "KittaTurn",
    "KittaTurnProvider",
    "State",
    "build_url",
    "split_text",
]
