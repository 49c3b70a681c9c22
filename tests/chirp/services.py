"""Chirp's framework classes, thin: the shared Pipecat service over its provider, and its entry in Pipecat's
side of the registry (:func:`ttsbridge.pipecat.build_service`)."""

from __future__ import annotations

from typing import Any

from pipecat.services.settings import TTSSettings

from chirp.provider import ChirpOptions, ChirpTurnProvider
from ttsbridge.pipecat import TurnTTSService, register_service


class ChirpTTSService(TurnTTSService):
    def __init__(self, provider: ChirpTurnProvider, **kwargs: Any) -> None:
        settings = TTSSettings(model=provider.options.model, voice=provider.options.voice, language=None)
        super().__init__(provider=provider, settings=settings, **kwargs)

    def _provider_options(self) -> dict[str, Any]:
        return {"voice": self._settings.voice}


def make_service(api_key: Any, *, base_url: str, voice: Any, encoding: str, **kwargs: Any) -> ChirpTTSService:
    provider = ChirpTurnProvider(base_url, options=ChirpOptions(voice=voice or "chirp"))
    return ChirpTTSService(provider, **kwargs)


def register() -> None:
    """Chirp's Pipecat service by name, as a provider package's Pipecat module would add it."""
    register_service("chirp", make_service)
