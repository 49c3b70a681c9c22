"""Chirp's framework classes, thin: the shared Pipecat service and LiveKit TTS over its provider."""

from __future__ import annotations

from typing import Any

from pipecat.services.settings import TTSSettings

from chirp.provider import ChirpTurnProvider
from ttsbridge.pipecat._ws import TurnTTSService


class ChirpTTSService(TurnTTSService):
    def __init__(self, provider: ChirpTurnProvider, **kwargs: Any) -> None:
        settings = TTSSettings(model=provider.options.model, voice=provider.options.voice, language=None)
        super().__init__(provider=provider, settings=settings, **kwargs)

    def _provider_options(self) -> dict[str, Any]:
        return {"voice": self._settings.voice}
