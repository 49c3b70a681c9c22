"""Kitta Realtime TTS v2 for Pipecat: the same service as Nineninesix, over :class:`KittaTurnProvider`.

    from ttsbridge.pipecat import KittaTTSService

    tts = KittaTTSService(
        api_key=os.environ["KITTA_API_KEY"],            # or leave it out: KITTA_API_KEY is read
        settings=KittaTTSService.Settings(voice="my-voice-id", model="fishaudio-s21pro-flash"),
    )

Kitta carries one generation per WebSocket; the provider keeps a warm standby connection (connected and
authenticated, no session started until a turn opens) so a turn's first sentence waits only for start/ready, and barge-in closes the turn's session (v2 has no
cancel event). Everything else (turns, barge-in, transcript, errors, metrics) is the shared
:class:`~ttsbridge.pipecat.TurnTTSService`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pipecat.services.settings import TTSSettings
from pipecat.utils.types import NOT_GIVEN, NotGiven

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.kitta.catalog import resolve_api_key
from ttsbridge.kitta.models import DEFAULT_MODEL, OPTIONAL_REQUEST_FIELDS
from ttsbridge.pipecat._ws import TurnTTSService

if TYPE_CHECKING:
    from ttsbridge.cache import PhraseCache  # (imported on use: docs/cache.md)

__all__ = ["KittaTTSService", "KittaTTSSettings", "make_service"]

#: ``start.request`` optional fields besides ``language`` (a Pipecat setting of its own): the provider's list
_OPTIONAL = tuple(name for name in OPTIONAL_REQUEST_FIELDS if name != "language")


@dataclass
class KittaTTSSettings(TTSSettings):
    """Runtime-updatable settings of :class:`KittaTTSService` (``TTSUpdateSettingsFrame(delta=...)``).

    ``voice`` (``start.request.voice_id``) is required; ``model`` defaults to ``fishaudio-s21pro-flash``. The
    optional fields are the ``start.request`` fields of the same names (None = left out); each model accepts
    only some of them, which is checked before anything connects. A change applies from the next turn (the warm connection is kept).
    """

    speed: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    volume: float | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    emotion: str | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    latency: str | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    chunk_length: int | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    instructions: str | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)
    optimize_instructions: bool | NotGiven | None = field(default_factory=lambda: NOT_GIVEN)


class KittaTTSService(TurnTTSService):
    """Kitta Realtime TTS v2 (MessagePack over WebSocket), one session per turn, with a warm standby.

    Args:
        api_key: Kitta key; defaults to ``KITTA_API_KEY``. Sent only in the handshake's ``Authorization``
            header (never in a URL), never logged.
        base_url: server, ``wss://realtime.fishaudio.org`` by default (``http://`` emulator URLs work).
        sample_rate: output rate of the audio frames; ``None`` uses the pipeline's ``audio_out_sample_rate``.
            The server's PCM is resampled locally.
        settings: ``KittaTTSService.Settings(voice=..., model=..., language=..., speed=...)``.
        standby: keep one pre-connected, authenticated connection (no handshake on a turn's critical path;
            ``start`` is sent only when a turn opens).
        provider_options: passed to :class:`~ttsbridge.kitta.KittaTurnProvider`: ``standby_max_age``,
            ``auth="frame"``, ``max_retries``, ``event_timeout``, ``limits``, and the connection settings by
            name (``connect_timeout``, the keepalive...: docs/kitta.md)...
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache` for ``TTSSpeakFrame``\\ s (docs/cache.md).
        **kwargs: Pipecat ``TTSService`` arguments (``text_aggregation_mode``, ``text_transforms``...).

    Raises:
        TTSInvalidOptionError: no key, no voice, or an option the model does not accept.
    """

    Settings = KittaTTSSettings
    _settings: KittaTTSSettings
    turn_settings: ClassVar[frozenset[str]] = frozenset({"voice", "model", "language", *_OPTIONAL})

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        sample_rate: int | None = None,
        settings: TTSSettings | None = None,
        standby: bool = True,
        provider_options: Mapping[str, Any] | None = None,
        phrase_cache: PhraseCache | None = None,
        **kwargs: Any,
    ) -> None:
        key = resolve_api_key(api_key)
        store = KittaTTSSettings(model=DEFAULT_MODEL, voice=None, language=None, **dict.fromkeys(_OPTIONAL))
        if settings is not None:
            store.apply_update(settings)  # type: ignore[arg-type]
        if not store.voice:
            raise TTSInvalidOptionError("voice", store.voice, "a Kitta voice id: Settings(voice=...)")
        # Language is pushed after Pipecat has converted it; the rest is validated here, before any I/O.
        options = KittaOptions(**_options_of(store, language=None))
        extra: dict[str, Any] = dict(provider_options or {})
        if base_url is not None:
            extra["base_url"] = base_url
        provider = KittaTurnProvider(key, options=options, standby=standby, **extra)
        super().__init__(
            provider=provider,
            settings=store,
            secrets=(key,),
            phrase_cache=phrase_cache,
            sample_rate=sample_rate,
            **kwargs,
        )

    def _provider_options(self) -> dict[str, Any]:
        return _options_of(self._settings, language=self._service_language(self._settings.language))


def _options_of(store: KittaTTSSettings, *, language: str | None) -> dict[str, Any]:
    """The :class:`KittaOptions` fields the settings ask for (``voice`` is ``voice_id``; None: left out)."""
    return {
        "voice_id": store.voice,
        "model": store.model,
        "language": language,
        "speed": store.speed,
        "volume": store.volume,
        "emotion": store.emotion,
        "latency": store.latency,
        "chunk_length": store.chunk_length,
        "instructions": store.instructions,
        "optimize_instructions": store.optimize_instructions,
    }


def make_service(
    api_key: str | None, *, base_url: str, voice: str | None, encoding: str, **kwargs: Any
) -> KittaTTSService:
    """The service as :func:`ttsbridge.pipecat.build_service` builds it by name (the wire is always PCM:
    ``encoding`` is ignored; a voice is required)."""
    settings = KittaTTSService.Settings(voice=voice)
    return KittaTTSService(api_key, base_url=base_url, settings=settings, **kwargs)
