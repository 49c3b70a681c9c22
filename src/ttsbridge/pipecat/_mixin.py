"""What the Pipecat WebSocket and HTTP services share, written once over :mod:`ttsbridge.turns`.

:class:`~ttsbridge.pipecat.TurnTTSService` (``_ws.py``, a Pipecat ``WebsocketTTSService``) maps one Pipecat
audio context (one LLM turn, or one ``TTSSpeakFrame``) to one provider :class:`~ttsbridge.turns.Turn`;
:class:`~ttsbridge.pipecat.TurnHttpTTSService` (``_http.py``, a plain ``TTSService``) speaks every released
sentence through :meth:`~ttsbridge.turns.TurnProvider.synthesize`. Per-provider services
(``NineninesixTTSService``, ``KittaTTSService``...) are thin subclasses that build the provider and name its
settings.

What the base guarantees, whatever the provider:

* every sentence the aggregator releases goes to the turn's :meth:`Turn.send`; the end of the LLM turn (or of
  the ``TTSSpeakFrame``) calls :meth:`Turn.end`;
* barge-in cancels the open turns (:meth:`Turn.cancel`, in the background so the ``InterruptionFrame`` is not
  held up) and no audio of a cancelled turn is pushed after the interruption; the connection is the provider's
  and stays up;
* audio arrives already decoded and resampled to the pipeline's output rate, and is pushed as
  ``TTSAudioRawFrame``\\ s followed by ``TTSStoppedFrame`` when the turn is done;
* a failed turn ends at once with an ``ErrorFrame`` (permanent, i.e. the service becomes unusable, only for
  a bad key, a key without access, an unknown voice, model or format; out of credits is ``QUOTA`` and the next
  turn tries again); the rest of its text is dropped, and never reaches the LLM context as if it had been
  spoken;
* word-level ``TTSTextFrame``\\ s are emitted as the audio that carries them is pushed (see
  :mod:`ttsbridge.policy.words`), so an interrupted assistant message ends near where playback stopped
  (``word_timestamps=False``: none; Pipecat commits a turn's text whole once its audio has played);
* the text is sent in its spoken form (:mod:`ttsbridge.text`, ``normalize_text=False`` turns it off), while
  Pipecat, the word frames, the LLM context and the usage ledger's "heard" keep the LLM's own words; a
  rewritten span ("$1,234.50") is heard whole or not at all (docs/text.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from loguru import logger
from pipecat.frames.frames import TTSStoppedFrame
from pipecat.services.settings import TTSSettings
from pipecat.transcriptions.language import Language
from pipecat.utils.errors import ErrorCategory

from ttsbridge._redact import redact
from ttsbridge.cache import CachedProvider, PhraseCache
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.pipecat._aggregator import ClauseTokenAggregator
from ttsbridge.pipecat._errors import classify
from ttsbridge.policy.words import DEFAULT_CHARS_PER_SECOND, SpeechRate, TimedWord, WordClock
from ttsbridge.text import normalizer_from
from ttsbridge.text.adapter import SpokenForm
from ttsbridge.text.stream import StreamNormalizer
from ttsbridge.tracing import PIPECAT_NAMES, TurnRecord
from ttsbridge.turns import TurnProvider

if TYPE_CHECKING:
    from ttsbridge.text.normalizer import TextNormalizer

__all__: list[str] = []

#: How many failed context ids are remembered (to drop the rest of a failed turn's text).
_FAILED_MEMORY = 256


class _TurnServiceMixin:
    """What the WebSocket and HTTP services share: settings -> provider options, error reporting, word
    timing, and the bookkeeping that keeps a failed turn's unspoken text out of the LLM context.

    Must come before the Pipecat base class in the MRO.
    """

    # Set by the concrete class' __init__ before TTSService.__init__ runs.
    _provider: TurnProvider
    #: The provider wrapped by the phrase cache, for whole known texts (None: no ``phrase_cache``).
    _phrases: CachedProvider | None
    _secrets: tuple[str, ...]
    _speech_rate: SpeechRate
    _failed_contexts: OrderedDict[str, None]
    _settings: TTSSettings

    #: The settings that are provider options (a change applies to the turns opened after it); a subclass
    #: that adds some says so here and in :meth:`_provider_options`.
    turn_settings: ClassVar[frozenset[str]] = frozenset({"voice", "model", "language"})

    #: Whether TOKEN mode coalesces tokens into clauses before filters, transforms and ``Turn.send``, one
    #: request per clause (both providers render every send as a unit of its own: a Nineninesix transcript, a
    #: flushed Kitta segment); see :meth:`_coalesce_at_aggregation`.
    coalesce_tokens: ClassVar[bool] = True
    #: Pipecat ``TTSService`` arguments each service defaults differently (``push_stop_frames``...).
    pipecat_defaults: ClassVar[dict[str, Any]] = {}
    #: True while Pipecat speaks a ``TTSSpeakFrame``: its whole text reaches ``run_tts`` in one call, so the
    #: phrase cache may serve it (docs/cache.md).
    _speaking_frame: bool = False

    def __init__(
        self,
        *,
        provider: TurnProvider,
        settings: TTSSettings,
        secrets: Sequence[str | None] = (),
        phrase_cache: PhraseCache | None = None,
        chars_per_second: float = DEFAULT_CHARS_PER_SECOND,
        coalesce_tokens: bool | None = None,
        word_timestamps: bool = True,
        normalize_text: bool | TextNormalizer = True,
        **kwargs: Any,
    ) -> None:
        if not isinstance(word_timestamps, bool):
            raise TTSInvalidOptionError("word_timestamps", word_timestamps, "True or False")
        #: the voice normalizer (:mod:`ttsbridge.text`); None: text is sent as the LLM wrote it
        self._spoken = SpokenForm(normalizer_from(normalize_text), lambda: self._provider.options)
        #: False: no word-level TTSTextFrames (Pipecat commits each turn's text whole when its audio context
        #: has played; an interrupted turn's text is not committed). Saves Pipecat's per-word work.
        self._word_timestamps = word_timestamps
        self._provider = provider
        self._phrases = CachedProvider(provider, phrase_cache) if phrase_cache is not None else None
        self._secrets = tuple(s for s in secrets if s)
        self._speech_rate = SpeechRate(chars_per_second)
        self._failed_contexts = OrderedDict()
        kwargs.setdefault("push_text_frames", False)
        kwargs.setdefault("push_start_frame", True)
        for name, value in self.pipecat_defaults.items():
            kwargs.setdefault(name, value)
        super().__init__(settings=settings, **kwargs)  # type: ignore[call-arg]  # the Pipecat base, next in the MRO
        coalesce = self.coalesce_tokens if coalesce_tokens is None else coalesce_tokens
        self._coalesce_at_aggregation(coalesce)
        self._sync_provider_options()

    def _coalesce_at_aggregation(self, coalesce: bool) -> None:
        """TOKEN mode: coalesce streamed tokens into clauses at Pipecat's aggregation step, so its text
        filters and ``text_transforms`` (and the sequencer that feeds the LLM context) see whole clauses."""
        if coalesce and self._is_streaming_tokens:  # type: ignore[attr-defined]
            language = self._text_aggregator.language  # type: ignore[has-type]
            self._text_aggregator = ClauseTokenAggregator(language=language)

    async def _register_spoken_text(self, src_frame: Any, text: str, context_id: str) -> None:
        await super()._register_spoken_text(src_frame, text, context_id)  # type: ignore[misc]
        if isinstance(self._text_aggregator, ClauseTokenAggregator):
            # A released clause is a whole unit: give it its own slot in Pipecat's sequencer now, before its
            # audio. Left pending until the next sentence confirms its end, its words would arrive first and be
            # replayed behind later words, out of order in the LLM context.
            frames = await self._aggregated_frame_sequencer.finalize(context_id)  # type: ignore[attr-defined]
            await self._push_sequencer_frames(frames, context_id)  # type: ignore[attr-defined]

    async def _handle_tts_speak(self, frame: Any) -> None:
        self._speaking_frame = True
        try:
            await super()._handle_tts_speak(frame)  # type: ignore[misc]
        finally:
            self._speaking_frame = False

    # -- the spoken form (ttsbridge.text) ----------------------------------------------------------------

    @property
    def text_normalizer(self) -> TextNormalizer | None:
        """The voice normalizer (its ``lexicon`` may be changed at run time); None when it is off."""
        return self._spoken.normalizer

    def _text_stream(self) -> StreamNormalizer:
        """A new turn's normalizer, for the provider's current voice and language (off: a pass-through)."""
        return self._spoken.stream()

    def spoken_form(self, text: str) -> str:
        """``text`` (a whole known text) as this service sends it (the phrase cache's key)."""
        return self._spoken.whole(text).spoken

    async def _warm_normalizer(self) -> None:
        """Import the normalizer's rules now (at start), not on the first sentence that needs them."""
        failure = (
            await self._spoken.warm()
        )  # (never fails a start: the first text then imports what it needs)
        if failure is not None:
            logger.warning(f"{self} text normalizer warm-up failed: {failure}")

    def _phrase_known(self) -> bool:
        """``run_tts``' text is a whole utterance (a ``TTSSpeakFrame``) and the service has a phrase cache."""
        return self._speaking_frame and self._phrases is not None

    @property
    def provider(self) -> TurnProvider:
        """The :class:`~ttsbridge.turns.TurnProvider` this service speaks through."""
        return self._provider

    def can_generate_metrics(self) -> bool:
        return True

    def language_to_service_language(self, language: Language) -> str | None:
        """Pipecat ``Language`` -> the provider's language string (its BCP-47 code: ``"en"``, ``"de-DE"``)."""
        return str(getattr(language, "value", language))

    # -- settings -----------------------------------------------------------------------------------------

    def _provider_options(self) -> dict[str, Any]:
        """The provider options the current settings ask for, by option field (a subclass whose provider
        names them otherwise, or has more, overrides this)."""
        s = self._settings
        return {"voice": s.voice, "model": s.model, "language": self._service_language(s.language)}

    def _service_language(self, language: Any) -> str | None:
        """A language setting (a Pipecat ``Language``, a code, or None) as the provider's language option."""
        return self.language_to_service_language(language) if isinstance(language, Language) else language

    def _sync_provider_options(self) -> None:
        """Push the settings to the provider; raises TTSInvalidOptionError for a bad value."""
        self._provider.update_options(**self._provider_options())

    async def _update_settings(self, delta: TTSSettings) -> dict[str, Any]:
        changed: dict[str, Any] = await super()._update_settings(delta)  # type: ignore[misc]
        if not changed:
            return changed
        try:
            self._sync_provider_options()
        except TTSInvalidOptionError as exc:
            # Refuse the update: keep speaking with the settings that work.
            for name, old in changed.items():
                if hasattr(self._settings, name):
                    setattr(self._settings, name, old)
                else:
                    self._settings.extra[name] = old
            await self.push_error(  # type: ignore[attr-defined]
                error_msg=f"{self} rejected settings update: {self._redact(exc)}",
                exception=exc,
                category=ErrorCategory.APPLICATION,
            )
            return {}
        if changed.keys() & {"voice", "model"}:
            # Another voice speaks at another rate.
            self._speech_rate.reset()
        if changed.keys() & self.turn_settings:
            await self._on_turn_settings_changed(changed)
        return changed

    async def _on_turn_settings_changed(self, changed: dict[str, Any]) -> None:
        """Hook: settings that apply to new turns have changed."""

    # -- errors -------------------------------------------------------------------------------------------

    def _redact(self, text: object) -> str:
        return redact(text, self._secrets)

    async def _close_provider(self) -> None:
        try:
            await self._provider.aclose()
        except Exception as exc:
            logger.warning(f"{self} error closing the provider: {self._redact(exc)}")

    async def _report_failure(self, exc: BaseException, context_id: str | None = None) -> None:
        """Push an ErrorFrame for ``exc``: fatal errors make the service unusable."""
        verdict = classify(exc)
        where = f" (context {context_id})" if context_id else ""
        message = f"{self} {self._provider.provider or 'TTS'} error{where}: {self._redact(exc)}"
        await self.push_error(  # type: ignore[attr-defined]
            error_msg=message,
            exception=exc if isinstance(exc, Exception) else None,
            category=verdict.category,
            force_treat_as_permanent=verdict.fatal,
        )

    def _mark_failed(self, context_id: str) -> bool:
        """Remember that ``context_id`` failed; False if it was already known."""
        if context_id in self._failed_contexts:
            return False
        self._failed_contexts[context_id] = None
        while len(self._failed_contexts) > _FAILED_MEMORY:
            self._failed_contexts.popitem(last=False)
        return True

    def _drop_unspoken_text(self, context_id: str) -> None:
        """Complete ``context_id``'s spoken slots in Pipecat's sequencer without emitting their text.

        Pipecat force-completes a slot at the end of its audio context by emitting the text no word event
        covered, as if it had been spoken (pipecat #5305). For a failed turn that text was never heard.
        """
        sequencer = getattr(self, "_aggregated_frame_sequencer", None)
        slots = getattr(sequencer, "_slots", None)
        if sequencer is None or slots is None:
            return
        for slot in slots:
            if getattr(slot, "context_id", None) == context_id and slot.spoken and not slot.complete:
                slot.complete = True

    async def _end_failed_audio_context(self, context_id: str) -> None:
        """Drop the failed context's unspoken text and end its audio context now (no 3-second wait)."""
        self._drop_unspoken_text(context_id)
        sequencer = getattr(self, "_aggregated_frame_sequencer", None)
        if sequencer is not None:
            # Text left out of speech (skip_text_types) that waited behind the dropped slots goes on now.
            for frame in sequencer.flush():
                await self.push_frame(frame)  # type: ignore[attr-defined]
        await self._close_audio_context(context_id)

    async def _close_audio_context(self, context_id: str) -> None:
        """End ``context_id``'s audio context with a ``TTSStoppedFrame`` (queued behind its audio), if open."""
        if self.audio_context_available(context_id):  # type: ignore[attr-defined]
            await self._append_stop_frame(context_id)
            await self.remove_audio_context(context_id)  # type: ignore[attr-defined]

    async def _append_stop_frame(self, context_id: str) -> None:
        """The ``TTSStoppedFrame`` that ends ``context_id``'s audio (a phone call's final mark goes behind it)."""
        await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))  # type: ignore[attr-defined]

    async def _fail_context(self, context_id: str, exc: BaseException) -> None:
        """``context_id`` failed: report it once, end its audio context now and drop its unspoken text."""
        if not self._mark_failed(context_id):
            return
        await self.stop_all_metrics()  # type: ignore[attr-defined]
        await self._report_failure(exc, context_id)
        await self._end_failed_audio_context(context_id)

    async def _record_context_audio_outcome(self, context_id: str, received_audio: bool) -> None:
        # A failed turn was already reported with its real cause; don't report it again as "completed with
        # no audio", and don't count it towards Pipecat's silent-provider limit.
        if context_id in self._failed_contexts:
            return
        await super()._record_context_audio_outcome(context_id, received_audio)  # type: ignore[misc]

    async def _synthesize_text(self, text: str, context_id: str) -> None:
        await super()._synthesize_text(text, context_id)  # type: ignore[misc]
        if not self.is_usable:  # type: ignore[attr-defined]
            # A written-off service (fatal error) speaks nothing; Pipecat has opened an audio context for the
            # text all the same. End it now rather than after Pipecat's idle timeout, and keep the unspoken
            # text out of the LLM context.
            await self._end_failed_audio_context(context_id)

    async def _push_words(self, clock: WordClock, words: list[TimedWord], context_id: str) -> None:
        if not words or not self._word_timestamps:
            return
        if clock.unspaced:
            # CJK / Thai: units are characters that carry their own spacing (as Pipecat's Cartesia service).
            await self.add_word_timestamps(  # type: ignore[attr-defined]
                [(w.text, w.start) for w in words], context_id, includes_inter_frame_spaces=True
            )
        else:
            await self.add_word_timestamps([(w.word, w.start) for w in words], context_id)  # type: ignore[attr-defined]

    # -- tracing ------------------------------------------------------------------------------------------

    def _tts_span(self, context_id: str) -> Any:
        """The ``tts`` span Pipecat's ``traced_tts`` opened for ``context_id`` (None when tracing is off).

        Pipecat keeps it in ``self._tts_spans`` (pipecat 1.14 ``service_decorators``); there is no public
        accessor, and the span is not made current."""
        entry = getattr(self, "_tts_spans", {}).get(context_id)
        return entry.get("span") if isinstance(entry, dict) else None

    def _trace(self, context_id: str, record: TurnRecord | None) -> None:
        """Write the turn's facts on its span, with Pipecat's names where it has them (idempotent)."""
        if record is not None:
            record.apply(self._tts_span(context_id), PIPECAT_NAMES)

    def _end_interrupted_span(self, context_id: str) -> None:
        """Pipecat ends the interrupted span of the *playing* context only; a queued context that was
        interrupted would keep its span open forever."""
        manager = getattr(self, "_audio_context_manager", None)
        if manager is None or getattr(manager, "playing_context_id", None) == context_id:
            return
        entry = getattr(self, "_tts_spans", {}).pop(context_id, None)
        if isinstance(entry, dict) and entry.get("span") is not None:
            entry["span"].set_attribute("tts.interrupted", True)
            entry["span"].end()
