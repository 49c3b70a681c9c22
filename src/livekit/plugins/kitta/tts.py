"""``kitta.TTS``: LiveKit TTS over the Kitta turn provider (the shared adapter does the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from livekit.agents import tokenize, tts
from livekit.agents.types import NOT_GIVEN, NotGivenOr

from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.kitta.catalog import resolve_api_key
from ttsbridge.kitta.models import OPTIONAL_REQUEST_FIELDS
from ttsbridge.livekit import PluginTTS, TurnChunkedStream, TurnSynthesizeStream
from ttsbridge.livekit._plugin import given

from .log import logger
from .models import DEFAULT_BASE_URL, DEFAULT_MODEL, DEFAULT_SAMPLE_RATE, DISPLAY_NAME, TTSLatency, TTSModels

if TYPE_CHECKING:
    from ttsbridge.text.normalizer import TextNormalizer

if TYPE_CHECKING:
    from ttsbridge.cache import PhraseCache  # (imported on use: docs/cache.md)

ChunkedStream = TurnChunkedStream
SynthesizeStream = TurnSynthesizeStream


class TTS(PluginTTS[KittaOptions]):
    """Kitta Realtime TTS v2 for LiveKit Agents.

    Args:
        api_key: the Kitta key; read from ``$KITTA_API_KEY`` when not given. It only travels in the
            handshake's ``Authorization`` header (never in a URL), and never reaches a log or exception.
        voice: voice id (``start.request.voice_id``).
        base_url: server (``wss://realtime.fishaudio.org``; an emulator's ``http://...`` works too).
        model: one of :data:`TTSModels`; the optional fields each model accepts are checked up front.
        sample_rate: the rate LiveKit receives (the server's PCM is resampled locally).
        language, speed, volume, emotion, latency, chunk_length, instructions, optimize_instructions:
            optional ``start.request`` fields (None = left out).
        standby: keep one connection pre-connected and authenticated (no session is started until a
            turn opens), so a turn pays no handshake (v2 carries one generation per connection).
        word_timestamps: publish estimated word timing for aligned transcripts (see docs/livekit.md).
        tokenizer: sentence tokenizer for ``stream()``; default blingfire.
        text_pacing: ``True`` (LiveKit's default ``tts.SentenceStreamPacer``), a pacer, or ``False`` (default):
            batch the sentences ``stream()`` sends while enough audio is left to play, as LiveKit's plugins.
        normalize_text: send the text in its spoken form ("$1,234.50" as "one thousand two hundred
            thirty-four dollars and fifty cents": ``True``, the default, or a ``ttsbridge.text.TextNormalizer``
            with a language, a lexicon...) or as written (``False``); transcripts keep the LLM's words
            (docs/text.md).
        client_options: advanced settings (``auth="frame"``, ``max_retries``, ``event_timeout``,
            ``standby_max_age``, ``limits``, and the connection settings by name: ``connect_timeout``, the
            keepalive, ``proxy``, ``ssl``...: docs/kitta.md).
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache` (see ``nineninesix.TTS``; docs/cache.md).

    Raises:
        TTSInvalidOptionError (a ``ValueError``): a missing key or an option outside the allowed values.
    """

    label = "kitta.TTS"
    provider_name = DISPLAY_NAME
    plugin_logger = logger

    def __init__(
        self,
        api_key: str | None = None,
        *,
        voice: str,
        base_url: str = DEFAULT_BASE_URL,
        model: TTSModels | str = DEFAULT_MODEL,
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        language: str | None = None,
        speed: float | None = None,
        volume: float | None = None,
        emotion: str | None = None,
        latency: TTSLatency | None = None,
        chunk_length: int | None = None,
        instructions: str | None = None,
        optimize_instructions: bool | None = None,
        standby: bool = True,
        word_timestamps: bool = True,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer] = NOT_GIVEN,
        text_pacing: tts.SentenceStreamPacer | bool = False,
        normalize_text: bool | TextNormalizer = True,
        client_options: dict[str, Any] | None = None,
        phrase_cache: PhraseCache | None = None,
    ) -> None:
        """See the class (its arguments are documented there)."""
        given = {k: v for k, v in locals().items() if k in OPTIONAL_REQUEST_FIELDS and v is not None}
        key = resolve_api_key(api_key)
        options = KittaOptions(voice_id=voice, model=model, **given)
        provider = KittaTurnProvider(
            key, base_url=base_url, options=options, standby=standby, **(client_options or {})
        )
        super().__init__(
            provider,
            key,
            base_url,
            sample_rate,
            word_timestamps,
            tokenizer,
            text_pacing,
            phrase_cache,
            normalize_text,
        )

    def update_options(
        self,
        *,
        voice: NotGivenOr[str] = NOT_GIVEN,
        model: NotGivenOr[TTSModels | str] = NOT_GIVEN,
        language: NotGivenOr[str | None] = NOT_GIVEN,
        speed: NotGivenOr[float | None] = NOT_GIVEN,
        volume: NotGivenOr[float | None] = NOT_GIVEN,
        emotion: NotGivenOr[str | None] = NOT_GIVEN,
        latency: NotGivenOr[TTSLatency | None] = NOT_GIVEN,
        chunk_length: NotGivenOr[int | None] = NOT_GIVEN,
        instructions: NotGivenOr[str | None] = NOT_GIVEN,
        optimize_instructions: NotGivenOr[bool | None] = NOT_GIVEN,
    ) -> None:
        """Change options for turns opened from now on (validated at once; they apply from the next turn).
        ``None`` clears an optional field."""
        self._apply_option_changes(
            given(
                voice_id=voice,
                model=model,
                language=language,
                speed=speed,
                volume=volume,
                emotion=emotion,
                latency=latency,
                chunk_length=chunk_length,
                instructions=instructions,
                optimize_instructions=optimize_instructions,
            )
        )
