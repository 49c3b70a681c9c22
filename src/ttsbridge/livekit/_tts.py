"""LiveKit's ``tts.TTS`` over any :class:`~ttsbridge.turns.TurnProvider`: :class:`TurnTTS`.

See :mod:`ttsbridge.livekit` for what the streams do; the plugins build on :mod:`ttsbridge.livekit._plugin`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any

from livekit.agents import APIConnectOptions, tokenize, tts, utils
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, NotGivenOr
from livekit.agents.utils import is_given

from ttsbridge.cache import CachedProvider, PhraseCache
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.livekit._chunked import TurnChunkedStream
from ttsbridge.livekit._job import bind_job
from ttsbridge.livekit._owner import StreamOwner
from ttsbridge.livekit._stream import TurnSynthesizeStream
from ttsbridge.policy.words import DEFAULT_CHARS_PER_SECOND, SpeechRate
from ttsbridge.text import normalizer_from
from ttsbridge.text.adapter import SpokenForm
from ttsbridge.turns import TurnProvider

if TYPE_CHECKING:
    from ttsbridge.text.normalizer import TextNormalizer

__all__ = ["TurnTTS"]

_default_logger = logging.getLogger("ttsbridge.livekit")


def _stream_pacer(text_pacing: object) -> tts.SentenceStreamPacer | None:
    """``text_pacing`` as LiveKit's plugins take it: True (a default pacer), False (none) or a pacer."""
    if isinstance(text_pacing, tts.SentenceStreamPacer):
        return text_pacing
    if text_pacing is True:
        return tts.SentenceStreamPacer()
    if text_pacing is False:
        return None
    raise TTSInvalidOptionError(
        "text_pacing", text_pacing, "True, False or a livekit.agents.tts.SentenceStreamPacer"
    )


class TurnTTS(StreamOwner):
    """A LiveKit TTS over a :class:`TurnProvider` (the per-provider plugins subclass it).

    Args:
        turn_provider: opens turns; owned by this TTS (closed by :meth:`aclose`).
        sample_rate: the rate LiveKit receives (the provider resamples to it).
        model: model name, for metrics.
        provider_name: provider name, for metrics (``"Nineninesix"``).
        word_timestamps: publish estimated word timing (``aligned_transcript`` capability).
        tokenizer: sentence tokenizer for ``stream()`` (default: blingfire, as LiveKit's own plugins).
        text_pacing: pace the sentences ``stream()`` sends, as LiveKit's own plugins: ``True`` for a default
            ``tts.SentenceStreamPacer``, a pacer of your own, or ``False`` (default) to send each sentence at once.
        chars_per_second: the initial speaking rate for word timing, before any audio was measured.
        logger: where to log (the plugin's ``livekit.plugins.<name>`` logger).
        secrets: strings to mask from every error text and log line (the API key).
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache`: ``say()`` / ``synthesize()`` of a text it holds
            send nothing and bill nothing (the provider wrapped in a :class:`~ttsbridge.cache.CachedProvider`
            for the texts known whole; docs/cache.md).
        normalize_text: send the text in its spoken form (``True``, the default; a
            :class:`~ttsbridge.text.TextNormalizer` of your own) or as written (``False``). The aligned
            transcript keeps the LLM's own words either way (docs/text.md).
    """

    def __init__(
        self,
        *,
        turn_provider: TurnProvider,
        sample_rate: int,
        model: str,
        provider_name: str,
        word_timestamps: bool = True,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer] = NOT_GIVEN,
        text_pacing: tts.SentenceStreamPacer | bool = False,
        chars_per_second: float = DEFAULT_CHARS_PER_SECOND,
        logger: logging.Logger | None = None,
        secrets: tuple[str, ...] = (),
        phrase_cache: PhraseCache | None = None,
        normalize_text: bool | TextNormalizer = True,
    ) -> None:
        if (
            isinstance(sample_rate, bool)
            or not isinstance(sample_rate, int)
            or not 8000 <= sample_rate <= 96000
        ):
            raise TTSInvalidOptionError("sample_rate", sample_rate, "an integer rate in Hz, 8000-96000")
        stream_pacer = _stream_pacer(text_pacing)
        self._spoken = SpokenForm(normalizer_from(normalize_text), lambda: self._turn_provider.options)
        super().__init__(
            capabilities=tts.TTSCapabilities(streaming=True, aligned_transcript=word_timestamps),
            sample_rate=sample_rate,
            num_channels=1,
        )
        self._turn_provider = turn_provider
        self._phrases = CachedProvider(turn_provider, phrase_cache) if phrase_cache is not None else None
        self._model = model
        self._provider_name = provider_name
        self._word_timestamps = word_timestamps
        self._sentence_tokenizer: tokenize.SentenceTokenizer = (
            tokenizer if is_given(tokenizer) else tokenize.blingfire.SentenceTokenizer()
        )
        self._stream_pacer: tts.SentenceStreamPacer | None = stream_pacer
        self._speech_rate = SpeechRate(chars_per_second)
        self._logger = logger or _default_logger
        self._secrets = tuple(s for s in secrets if s)
        self._streams: weakref.WeakSet[TurnSynthesizeStream] = weakref.WeakSet()
        self._prewarm_task: asyncio.Task[None] | None = None  # held until the next prewarm or aclose
        self._prewarm_failure: str | None = None
        self._closed = False

    # -- metadata

    @property
    def model(self) -> str:
        return self._model

    @property
    def provider(self) -> str:
        return self._provider_name

    @property
    def turn_provider(self) -> TurnProvider:
        return self._turn_provider

    @property
    def chars_per_second(self) -> float:
        """The speaking rate word timing starts from: measured on the completed turns (the last ~60 s of
        audio), starting from the prior (see :class:`~ttsbridge.policy.words.SpeechRate`)."""
        return self._speech_rate.chars_per_second

    def _apply_option_changes(self, changes: dict[str, Any]) -> None:
        """``update_options`` of the plugins: validate and apply ``changes`` (provider option fields) on the
        provider, keep the metrics' model name in step, and re-learn the speaking rate when the voice changed."""
        if not changes:
            return
        provider = self._turn_provider
        before = provider.options.voice
        provider.update_options(**changes)
        self._model = provider.options.model
        if provider.options.voice != before:
            self._reset_rate()  # word timing re-learns the new voice's speaking rate

    def _reset_rate(self) -> None:
        """Forget the measured rate (the voice changed): back to the prior."""
        self._speech_rate.reset()

    # -- API

    def synthesize(
        self, text: str, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> TurnChunkedStream:
        bind_job()
        return TurnChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(
        self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
    ) -> TurnSynthesizeStream:
        bind_job()
        stream = TurnSynthesizeStream(tts=self, conn_options=conn_options)
        self._streams.add(stream)
        return stream

    def prewarm(self) -> None:
        """Open the connection the next turn will use, in the background: one however many times it is called
        (and however many instances with the same settings call it). With no running loop (``prewarm_fnc``,
        import time) it does nothing: the first turn connects. After :meth:`aclose` it does nothing. A failure
        is logged once (redacted); the first turn then reports the real error, typed."""
        if self._closed or (self._prewarm_task is not None and not self._prewarm_task.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop yet: the first turn connects
        bind_job()
        self._prewarm_task = loop.create_task(self._prewarm(), name=f"{type(self).__name__}.prewarm")

    async def _prewarm(self) -> None:
        try:
            await self._turn_provider.prewarm(sample_rate=self.sample_rate)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            text = self._redact(exc)
            if text != self._prewarm_failure:  # once per distinct failure, not per call
                self._prewarm_failure = text
                self._logger.warning("prewarm failed: %s", text)
        else:
            self._prewarm_failure = None
        await self._warm_normalizer()  # after the connection: it never delays the socket

    async def aclose(self) -> None:
        """Close the streams, the prewarm, and let go of the shared connections (closed, 1000, once no other
        instance on this loop uses them). Idempotent; nothing reopens afterwards."""
        self._closed = True
        for stream in list(self._streams):
            await stream.aclose()
        self._streams.clear()
        if self._prewarm_task is not None:
            await utils.aio.cancel_and_wait(self._prewarm_task)
            self._prewarm_task = None
        await self._turn_provider.aclose()
