"""``nineninesix.TTS``: LiveKit TTS over the Nineninesix turn provider (the shared adapter does the rest)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiohttp
from livekit.agents import tokenize, tts, utils
from livekit.agents.types import NOT_GIVEN, NotGivenOr

from ttsbridge.livekit import PluginTTS, TurnChunkedStream, TurnSynthesizeStream
from ttsbridge.livekit._plugin import given
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.nineninesix.catalog import resolve_api_key

from .log import logger
from .models import (
    DEFAULT_BASE_URL,
    DEFAULT_MODEL,
    DEFAULT_SAMPLE_RATE,
    DISPLAY_NAME,
    TTSEncoding,
    TTSModels,
    TTSWireSampleRate,
)

if TYPE_CHECKING:
    from ttsbridge.cache import PhraseCache  # (imported on use: docs/cache.md)
    from ttsbridge.text.normalizer import TextNormalizer

ChunkedStream = TurnChunkedStream
SynthesizeStream = TurnSynthesizeStream


def _job_http_session() -> aiohttp.ClientSession | None:
    """The job's shared aiohttp session, or None outside a job (the provider opens and closes its own)."""
    try:
        return utils.http_context.http_session()
    except RuntimeError:
        return None


class TTS(PluginTTS[NineninesixOptions]):
    """Nineninesix TTS for LiveKit Agents (a drop-in for ``cartesia.TTS``).

    Args:
        api_key: ``sk_996_...``; read from ``$NINENINESIX_API_KEY`` when not given.
        base_url: API base (``https://`` for HTTP, the WebSocket URL is derived); point it at the
            ttsbridge emulator for offline runs.
        voice: voice id, or None for the server's default voice (then ``synthesize()`` goes over the
            WebSocket too: the HTTP endpoints require a voice; see docs/livekit.md).
        model: ``"gepard-1.0"`` (the only model).
        encoding: encoding on the wire. ``pcm_mulaw``/``pcm_alaw`` halve the bandwidth; the plugin
            decodes them, LiveKit always receives PCM16.
        sample_rate: the rate LiveKit receives. Rates the API lacks (24000, 48000...) are served at the
            nearest wire rate (see ``wire_sample_rate``) and resampled locally.
        http_session: aiohttp session for ``synthesize()`` with a voice (``POST /tts/sse``). Defaults to the job's
            shared session (``livekit.agents.utils.http_context``) when there is one.
        language: optional language code passed to the API.
        wire_sample_rate: force the rate asked of the server (8000/16000/22050); None picks
            ``sample_rate`` when the API has it, 22050 otherwise.
        word_timestamps: publish estimated word timing for aligned transcripts (the API has none; see
            docs/livekit.md for the estimate).
        tokenizer: sentence tokenizer for ``stream()``; default blingfire, as LiveKit's plugins.
        text_pacing: ``True`` (LiveKit's default ``tts.SentenceStreamPacer``), a pacer, or ``False`` (default):
            batch the sentences ``stream()`` sends while enough audio is left to play, as LiveKit's plugins.
        normalize_text: send the text in its spoken form ("$1,234.50" as "one thousand two hundred
            thirty-four dollars and fifty cents": ``True``, the default, or a ``ttsbridge.text.TextNormalizer``
            with a language, a lexicon...) or as written (``False``); transcripts keep the LLM's words
            (docs/text.md).
        client_options: advanced WebSocket settings (``cancel_timeout``, ``receive_timeout``,
            ``cancel_ack``, and the connection settings by name: ``connect_timeout``, ``max_idle``, the
            keepalive, ``proxy``, ``ssl``...: docs/nineninesix.md).
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache`: ``say()`` / ``synthesize()`` of a text it
            holds send nothing and bill nothing (docs/cache.md).

    Raises:
        TTSInvalidOptionError (a ``ValueError``): a missing key or an option outside the allowed values.
    """

    label = "nineninesix.TTS"
    provider_name = DISPLAY_NAME
    plugin_logger = logger

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        voice: str | None = None,
        model: TTSModels | str = DEFAULT_MODEL,
        encoding: TTSEncoding = "pcm_s16le",
        sample_rate: int = DEFAULT_SAMPLE_RATE,
        http_session: aiohttp.ClientSession | None = None,
        language: str | None = None,
        wire_sample_rate: TTSWireSampleRate | None = None,
        word_timestamps: bool = True,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer] = NOT_GIVEN,
        text_pacing: tts.SentenceStreamPacer | bool = False,
        normalize_text: bool | TextNormalizer = True,
        client_options: dict[str, Any] | None = None,
        phrase_cache: PhraseCache | None = None,
    ) -> None:
        """See the class (its arguments are documented there)."""
        key = resolve_api_key(api_key)
        options = NineninesixOptions(
            model=model, voice=voice, language=language, encoding=encoding, sample_rate=wire_sample_rate
        )
        session = http_session or _job_http_session()
        provider = NineninesixTurnProvider(
            key, base_url=base_url, options=options, http_session=session, **(client_options or {})
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
        language: NotGivenOr[str] = NOT_GIVEN,
        encoding: NotGivenOr[TTSEncoding] = NOT_GIVEN,
        wire_sample_rate: NotGivenOr[TTSWireSampleRate] = NOT_GIVEN,
    ) -> None:
        """Change options for turns opened from now on (validated at once; a turn already open keeps its
        options)."""
        self._apply_option_changes(
            given(
                voice=voice, model=model, language=language, encoding=encoding, sample_rate=wire_sample_rate
            )
        )

    def _repr_options(self, options: NineninesixOptions) -> str:
        return f", encoding={options.encoding!r}"
