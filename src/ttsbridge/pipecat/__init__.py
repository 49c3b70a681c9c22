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

from typing import TYPE_CHECKING

from ttsbridge._lazy import lazy_attributes

if TYPE_CHECKING:
    from ttsbridge.pipecat._http import TurnHttpTTSService
    from ttsbridge.pipecat._ws import TurnTTSService
    from ttsbridge.pipecat.kitta import KittaTTSService, KittaTTSSettings
    from ttsbridge.pipecat.nineninesix import (
        NineninesixHttpTTSService,
        NineninesixTTSService,
        NineninesixTTSSettings,
    )
    from ttsbridge.pipecat.services import build_service, register_service, unregister_service

# Each service is imported on first use: the Nineninesix services do not import Kitta's, nor Kitta's theirs.
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "KittaTTSService": "ttsbridge.pipecat.kitta",
        "KittaTTSSettings": "ttsbridge.pipecat.kitta",
        "NineninesixHttpTTSService": "ttsbridge.pipecat.nineninesix",
        "NineninesixTTSService": "ttsbridge.pipecat.nineninesix",
        "NineninesixTTSSettings": "ttsbridge.pipecat.nineninesix",
        "TurnHttpTTSService": "ttsbridge.pipecat._http",
        "TurnTTSService": "ttsbridge.pipecat._ws",
        "build_service": "ttsbridge.pipecat.services",
        "register_service": "ttsbridge.pipecat.services",
        "unregister_service": "ttsbridge.pipecat.services",
    },
    globals(),
)
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
