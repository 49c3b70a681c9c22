"""Pipecat services for ttsbridge's providers (``pip install ttsbridge[pipecat]``).

- :class:`NineninesixTTSService` / :class:`NineninesixHttpTTSService`: drop-in replacements for Pipecat's
  ``CartesiaTTSService`` / ``CartesiaHttpTTSService`` against the Nineninesix API.
- :class:`KittaTTSService`: the same service over Kitta Realtime TTS v2 (warm standby session per turn).
- :class:`TurnTTSService` / :class:`TurnHttpTTSService`: the provider-neutral bases, for any
  :class:`ttsbridge.turns.TurnProvider`.
- :func:`build_service`: a provider's WebSocket service by its registry name (``"nineninesix"``, ``"kitta"``;
  :func:`register_service` adds one).

See docs/pipecat.md.
"""

from __future__ import annotations

try:
    import pipecat  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "ttsbridge.pipecat needs Pipecat: pip install 'ttsbridge[pipecat]' (pipecat-ai>=1.14,<2)"
    ) from exc

from ttsbridge.pipecat._http import TurnHttpTTSService
from ttsbridge.pipecat._ws import TurnTTSService
from ttsbridge.pipecat.kitta import KittaTTSService, KittaTTSSettings
from ttsbridge.pipecat.nineninesix import (
    NineninesixHttpTTSService,
    NineninesixTTSService,
    NineninesixTTSSettings,
)
from ttsbridge.pipecat.services import build_service, register_service, unregister_service

__all__ = [
    "KittaTTSService",
    "KittaTTSSettings",
    "NineninesixHttpTTSService",
    "NineninesixTTSService",
    "NineninesixTTSSettings",
    "TurnHttpTTSService",
    "TurnTTSService",
    "build_service",
    "register_service",
    "unregister_service",
]
