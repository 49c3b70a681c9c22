"""Nineninesix TTS for Pipecat: drop-in replacements for ``CartesiaTTSService`` / ``CartesiaHttpTTSService``.

    from ttsbridge.pipecat import NineninesixTTSService

    tts = NineninesixTTSService(
        api_key=os.environ["NINENINESIX_API_KEY"],          # or leave it out: NINENINESIX_API_KEY is read
        settings=NineninesixTTSService.Settings(voice="a0e99841-..."),
    )

The framework logic lives in :mod:`ttsbridge.pipecat._mixin` (and ``_ws``, ``_ws_audio``, ``_http``); these
classes only build the provider.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pipecat.services.settings import TTSSettings

from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.nineninesix.catalog import API_KEY_ENV
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, DEFAULT_MODEL
from ttsbridge.pipecat._http import TurnHttpTTSService
from ttsbridge.pipecat._ws import TurnTTSService

if TYPE_CHECKING:
    import aiohttp

    from ttsbridge.cache import PhraseCache  # (imported on use: docs/cache.md)

__all__ = ["NineninesixHttpTTSService", "NineninesixTTSService", "NineninesixTTSSettings", "make_service"]


@dataclass
class NineninesixTTSSettings(TTSSettings):
    """Runtime-updatable settings of the Nineninesix services (``TTSUpdateSettingsFrame(delta=...)``).

    Parameters:
        voice: saved voice id; ``None`` speaks with the server's default voice.
        model: ``"gepard-1.0"`` (the only model).
        language: language hint (a Pipecat ``Language`` or a code such as ``"en"``); ``None`` lets the
            server decide.
    """


def _store_settings(settings: TTSSettings | None) -> NineninesixTTSSettings:
    store = NineninesixTTSSettings(model=DEFAULT_MODEL, voice=None, language=None)
    if settings is not None:
        store.apply_update(settings)  # type: ignore[arg-type]
    return store


def _provider(
    api_key: str | None,
    base_url: str,
    encoding: str,
    store: NineninesixTTSSettings,
    http_session: aiohttp.ClientSession | None,
    provider_options: Mapping[str, Any] | None,
) -> NineninesixTurnProvider:
    # Language is pushed after Pipecat has converted it (TTSService.__init__); voice and model are
    # validated here, before anything connects.
    options = NineninesixOptions(voice=store.voice, model=store.model, encoding=encoding)  # type: ignore[arg-type]
    return NineninesixTurnProvider(
        api_key=api_key,
        base_url=base_url,
        options=options,
        http_session=http_session,
        **dict(provider_options or {}),
    )


class _NineninesixService:
    """The constructor both Nineninesix services share: build the provider, hand it to the turn base."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        encoding: str = "pcm_s16le",
        sample_rate: int | None = None,
        settings: TTSSettings | None = None,
        http_session: aiohttp.ClientSession | None = None,
        provider_options: Mapping[str, Any] | None = None,
        phrase_cache: PhraseCache | None = None,
        **kwargs: Any,
    ) -> None:
        store = _store_settings(settings)
        provider = _provider(api_key, base_url, encoding, store, http_session, provider_options)
        super().__init__(  # type: ignore[call-arg]  # the turn base class that follows in the MRO
            provider=provider,
            settings=store,
            secrets=(api_key, os.environ.get(API_KEY_ENV)),
            phrase_cache=phrase_cache,
            sample_rate=sample_rate,
            **kwargs,
        )


class NineninesixTTSService(_NineninesixService, TurnTTSService):
    """Nineninesix streaming TTS over the WebSocket API, one server context per turn.

    Args:
        api_key: ``sk_996_...``; defaults to ``NINENINESIX_API_KEY``. Never logged.
        base_url: API base (``https://...``; the WebSocket URL is derived from it).
        encoding: wire encoding, ``pcm_s16le`` | ``pcm_mulaw`` | ``pcm_alaw``. G.711 halves the bytes on the
            wire and is decoded to PCM16 before frames are built (Pipecat frames are always PCM16).
        sample_rate: output rate of the audio frames; ``None`` uses the pipeline's
            ``audio_out_sample_rate``. The server is asked for that rate when it has it (8000, 16000,
            22050); otherwise it sends 22050 Hz and the audio is resampled locally.
        settings: ``NineninesixTTSService.Settings(voice=..., model=..., language=...)``.
        http_session: an aiohttp session to share (otherwise the provider owns one).
        provider_options: passed to :class:`~ttsbridge.nineninesix.NineninesixTurnProvider`:
            ``concurrent_limit_retries``, ``receive_timeout``, ``cancel_timeout``, and the connection
            settings by name (``connect_timeout``, ``max_idle``, the keepalive...: docs/nineninesix.md)...
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache`: a ``TTSSpeakFrame`` whose text it holds sends
            nothing and bills nothing (docs/cache.md).
        **kwargs: Pipecat ``TTSService`` arguments (``text_aggregation_mode``, ``text_transforms``...).

    Raises:
        TTSInvalidOptionError: a bad option (encoding, model...), before anything connects.
    """

    Settings = NineninesixTTSSettings
    _settings: NineninesixTTSSettings


class NineninesixHttpTTSService(_NineninesixService, TurnHttpTTSService):
    """Nineninesix TTS over ``POST /tts/sse``, for deployments that cannot hold a WebSocket.

    Every sentence is one request; its audio frames are pushed as the server-sent events arrive. Same
    arguments as :class:`NineninesixTTSService`. ``/tts/sse`` requires a voice: with ``voice=None`` (the
    server's default voice, which only the WebSocket has) each sentence is spoken as one WebSocket turn
    instead; set a voice to stay on HTTP.
    """

    Settings = NineninesixTTSSettings
    _settings: NineninesixTTSSettings


def make_service(
    api_key: str | None, *, base_url: str, voice: str | None, encoding: str, **kwargs: Any
) -> NineninesixTTSService:
    """The WebSocket service as :func:`ttsbridge.pipecat.build_service` builds it by name (``voice=None``:
    the server's default voice)."""
    settings = NineninesixTTSService.Settings(voice=voice) if voice else None
    return NineninesixTTSService(api_key, base_url=base_url, encoding=encoding, settings=settings, **kwargs)
