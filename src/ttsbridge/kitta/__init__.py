"""Kitta Realtime TTS v2 (MessagePack over one WebSocket per generation).

* :mod:`~ttsbridge.kitta.models`: wire models and :class:`KittaOptions`.
* :mod:`~ttsbridge.kitta.protocol`: the sans-I/O session state machine.
* :mod:`~ttsbridge.kitta.catalog`: the key, the URL, the handshake's errors, the retry backoff, the connection
  settings.
* :mod:`~ttsbridge.kitta.provider`: :class:`KittaTurnProvider` for the framework adapters (its turns are the
  engine's :class:`~ttsbridge.engine.turn.EngineTurn`, its connections the engine's, through its
  :class:`~ttsbridge.engine.dialers.StandbyDialer`).
"""

from __future__ import annotations

from ttsbridge.kitta.catalog import build_url
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
    KittaRequest,
    State,
    split_text,
)
from ttsbridge.kitta.provider import KittaTurnProvider

__all__ = [
    "DEFAULT_BASE_URL",
    "MODEL_CAPABILITIES",
    "SUBPROTOCOL",
    "KittaConnectionClosed",
    "KittaLimitError",
    "KittaLimits",
    "KittaOptions",
    "KittaProtocol",
    "KittaProtocolError",
    "KittaRequest",
    "KittaTurnProvider",
    "State",
    "build_url",
    "split_text",
]
