"""Pipecat TTS services written once over the provider-neutral :mod:`ttsbridge.turns` interface.

:class:`TurnTTSService` (a Pipecat ``WebsocketTTSService``) maps one Pipecat audio context (one LLM turn, or
one ``TTSSpeakFrame``) to one provider :class:`~ttsbridge.turns.Turn`; :class:`TurnHttpTTSService` (a plain
``TTSService``) speaks every released sentence through :meth:`~ttsbridge.turns.TurnProvider.synthesize`.
Per-provider services (``NineninesixTTSService``, ``KittaTTSService``...) are thin subclasses that build the
provider and name its settings.

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
  :mod:`ttsbridge.policy.words`), so an interrupted assistant message ends near where playback stopped.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from loguru import logger
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    InterruptionFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService, WebsocketTTSService
from pipecat.transcriptions.language import Language
from pipecat.utils.errors import ErrorCategory
from pipecat.utils.tracing.service_decorators import traced_tts

from ttsbridge._redact import redact
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.pipecat._aggregator import ClauseTokenAggregator
from ttsbridge.pipecat._errors import classify
from ttsbridge.pipecat._usage import TurnUsageMixin
from ttsbridge.policy.words import DEFAULT_CHARS_PER_SECOND, SpeechRate, TimedWord, WordClock
from ttsbridge.tracing import PIPECAT_NAMES, TurnRecord
from ttsbridge.turns import Turn, TurnProvider

__all__ = ["TurnHttpTTSService", "TurnTTSService"]

#: How many failed context ids are remembered (to drop the rest of a failed turn's text).
_FAILED_MEMORY = 256


class _TurnServiceMixin:
    """What the WebSocket and HTTP services share: settings -> provider options, error reporting, word
    timing, and the bookkeeping that keeps a failed turn's unspoken text out of the LLM context.

    Must come before the Pipecat base class in the MRO.
    """

    # Set by the concrete class' __init__ before TTSService.__init__ runs.
    _provider: TurnProvider
    _secrets: tuple[str, ...]
    _speech_rate: SpeechRate
    _failed_contexts: OrderedDict[str, None]
    _settings: TTSSettings

    #: Settings field -> provider option name. Subclasses extend or rename.
    settings_to_options: ClassVar[dict[str, str]] = {
        "voice": "voice",
        "model": "model",
        "language": "language",
    }

    def _init_turn_common(
        self, provider: TurnProvider, secrets: Sequence[str | None], chars_per_second: float
    ) -> None:
        self._provider = provider
        self._secrets = tuple(s for s in secrets if s)
        self._speech_rate = SpeechRate(chars_per_second)
        self._failed_contexts = OrderedDict()

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
        """The provider options the current settings ask for."""
        out: dict[str, Any] = {}
        for field_name, option in self.settings_to_options.items():
            value = getattr(self._settings, field_name, None)
            if isinstance(value, Language):
                value = self.language_to_service_language(value)
            out[option] = value
        return out

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
        if changed.keys() & self.settings_to_options.keys():
            await self._on_turn_settings_changed(changed)
        return changed

    async def _on_turn_settings_changed(self, changed: dict[str, Any]) -> None:
        """Hook: settings that apply to new turns have changed."""

    # -- errors -------------------------------------------------------------------------------------------

    def _redact(self, text: object) -> str:
        return redact(text, self._secrets)

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
        if self.audio_context_available(context_id):  # type: ignore[attr-defined]
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))  # type: ignore[attr-defined]
            await self.remove_audio_context(context_id)  # type: ignore[attr-defined]

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
        if not words:
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


@dataclass(eq=False)
class _TurnState:
    """One open provider turn, behind one Pipecat audio context."""

    context_id: str
    turn: Turn
    clock: WordClock
    reader: asyncio.Task[None] | None = None
    record: TurnRecord | None = None
    ended: bool = False
    cancelled: bool = False
    failed: bool = False
    last_activity: float = 0.0

    def touch(self) -> None:
        self.last_activity = time.monotonic()


class TurnTTSService(TurnUsageMixin, _TurnServiceMixin, WebsocketTTSService):
    """A Pipecat ``WebsocketTTSService`` over a :class:`~ttsbridge.turns.TurnProvider`.

    Pipecat's audio contexts map one-to-one onto provider turns: the context id Pipecat assigns to an LLM turn
    (or a ``TTSSpeakFrame``) opens one provider turn on its first sentence, every further sentence is sent on
    it, and the end of the LLM turn ends it. The provider owns the connection (pooled, reconnected on demand,
    refreshed before a server idle close); this service never reconnects on its own.

    Args:
        provider: the provider to speak through (owned: closed when the pipeline stops).
        secrets: strings to mask in every log line and error text (the API key).
        chars_per_second: prior speaking rate for word timing, until completed turns calibrate it.
        coalesce_tokens: in ``TextAggregationMode.TOKEN``, hold streamed tokens until a clause ends, at
            Pipecat's aggregation step (before its text filters and transforms run), for providers that
            render every send on its own. Defaults to the class attribute.
        **kwargs: passed to Pipecat's ``WebsocketTTSService`` / ``TTSService`` (``sample_rate``,
            ``settings``, ``text_aggregation_mode``, ``text_transforms``...).
    """

    Settings = TTSSettings
    _settings: TTSSettings

    #: Whether TOKEN mode coalesces tokens into clauses before filters, transforms and ``Turn.send`` (both
    #: providers render every send as a unit of its own: a Nineninesix transcript, a flushed Kitta segment).
    coalesce_tokens: ClassVar[bool] = True
    #: How often an audio context that waits for due audio is kept from Pipecat's 3-second idle timeout.
    context_refresh_interval_s: ClassVar[float] = 1.0
    #: How long an open turn (not yet ended) may go without text or audio before its audio context is left to
    #: Pipecat's idle timeout (the LLM has stalled; the next sentence reopens the context).
    open_turn_idle_s: ClassVar[float] = 10.0
    #: Bound on one audio frame made of chunks that were already queued when the first of them was read
    #: (never waits for audio: a chunk that is alone goes out alone). Used when the turn offers
    #: ``take_ready(max_bytes) -> bytes`` (see :meth:`_read_turn`).
    coalesce_audio_s: ClassVar[float] = 0.1

    def __init__(
        self,
        *,
        provider: TurnProvider,
        settings: TTSSettings,
        secrets: Sequence[str | None] = (),
        chars_per_second: float = DEFAULT_CHARS_PER_SECOND,
        coalesce_tokens: bool | None = None,
        **kwargs: Any,
    ) -> None:
        self._init_turn_common(provider, secrets, chars_per_second)
        kwargs.setdefault("push_text_frames", False)
        kwargs.setdefault("push_start_frame", True)
        kwargs.setdefault("push_stop_frames", False)
        kwargs.setdefault("pause_frame_processing", False)
        super().__init__(settings=settings, **kwargs)
        self._coalesce_at_aggregation(self.coalesce_tokens if coalesce_tokens is None else coalesce_tokens)
        self._turns: dict[str, _TurnState] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._refresher: asyncio.Task[None] | None = None
        self._init_usage()
        self._sync_provider_options()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self, frame: Frame) -> None:  # type: ignore[override]
        await super().start(frame)  # type: ignore[arg-type]
        await self._connect()

    async def stop(self, frame: EndFrame) -> None:
        # Pipecat waits for every audio context to finish playing before it disconnects; a turn whose LLM
        # response never ended would hold that wait, so end every open turn first (graceful: its text is
        # still spoken).
        for state in list(self._turns.values()):
            await self._end_turn(state)
        await super().stop(frame)

    async def _connect(self) -> None:
        await super()._connect()
        await self._connect_websocket()

    async def _disconnect(self) -> None:
        await super()._disconnect()
        await self._disconnect_websocket()

    async def _connect_websocket(self) -> None:
        """Warm the provider up (its connection pool, a standby session) so the first turn starts at once."""
        try:
            await self._prewarm()
        except Exception as exc:
            await self._report_failure(exc)
            await self._call_event_handler("on_connection_error", self._redact(exc))
            return
        await self._call_event_handler("on_connected")

    async def _prewarm(self) -> None:
        """``provider.prewarm()``, telling it the output rate when it takes one (the connection pool may be
        keyed by the wire format, which follows the rate)."""
        prewarm = self._provider.prewarm
        try:
            takes_rate = "sample_rate" in inspect.signature(prewarm).parameters
        except (TypeError, ValueError):
            takes_rate = False
        if takes_rate:
            await prewarm(sample_rate=self.sample_rate)  # type: ignore[call-arg]
        else:
            await prewarm()

    async def _disconnect_websocket(self) -> None:
        states = list(self._turns.values())
        self._turns.clear()
        for state in states:
            state.cancelled = True
        for state in states:
            if state.reader is not None and not state.reader.done():
                await self.cancel_task(state.reader)
            await self._cancel_turn_quietly(state.turn)
        for task in list(self._background):
            await self.cancel_task(task)
        try:
            await self._provider.aclose()
        except Exception as exc:
            logger.warning(f"{self} error closing the provider: {self._redact(exc)}")
        await self._call_event_handler("on_disconnected")

    async def _receive_messages(self) -> None:
        """Unused: the provider reads the connection; each turn's audio is read by its own task."""

    # -- synthesis ----------------------------------------------------------------------------------------

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Send ``text`` on the turn behind ``context_id``, opening the turn on its first sentence."""
        if context_id in self._failed_contexts:
            # The turn already failed: the rest of its text is not spoken (and not put in the context).
            logger.debug(f"{self} dropping text of failed context {context_id}")
            await self._end_failed_audio_context(context_id)
            yield None
            return
        if self._disconnecting:
            # Pipecat flushes the aggregator's last text after stop() on an EndFrame that closed an LLM turn
            # early; the service has shut down by then, so it is not spoken (nor opened on a new connection).
            logger.debug(f"{self} stopped; not speaking [{text}]")
            await self._end_failed_audio_context(context_id)
            yield None
            return
        state = self._turns.get(context_id)
        if state is None:
            record = TurnRecord(self._provider, sample_rate=self.sample_rate)
            try:
                turn = await self._open_turn()
            except Exception as exc:
                record.failed(exc)
                self._trace(context_id, record)
                await self._fail(context_id, exc)
                yield None
                return
            record.bind(turn)
            self._trace(context_id, record)
            self._track_usage(context_id, turn)
            state = _TurnState(
                context_id=context_id,
                turn=turn,
                clock=WordClock(self._speech_rate),
                record=record,
            )
            state.touch()
            self._turns[context_id] = state
            state.reader = self.create_task(self._read_turn(state), name=f"turn-{context_id[:8]}")
            self._ensure_refresher()
        # Word timing learns of the text before any of its audio can arrive.
        state.clock.add_text(text, boundary=not self._is_streaming_tokens)
        state.touch()
        try:
            await state.turn.send(text)
        except Exception as exc:
            await self._fail(context_id, exc)
            yield None
            return
        await self.start_tts_usage_metrics(text)
        yield None

    async def _open_turn(self) -> Turn:
        """Open a provider turn, awaited in this task: no task and no loop hop on the way out.

        A cancelled opening (barge-in) yields no turn, so there is none to cancel: ``open_turn`` is
        cancellation-safe (every provider creates its :class:`Turn` after its last await and leaves nothing
        half-open when an await is cancelled: a cancelled connect is closed, never pooled).
        """
        return await self._provider.open_turn(sample_rate=self.sample_rate)

    async def flush_audio(self, context_id: str | None = None) -> None:
        """End of the LLM turn (or of a ``TTSSpeakFrame``): no more text for that turn."""
        context_id = context_id or self.get_active_audio_context_id()
        state = self._turns.get(context_id) if context_id else None
        if state is not None:
            await self._end_turn(state)

    async def on_turn_context_completed(self) -> None:
        context_id = self._turn_context_id
        await super().on_turn_context_completed()
        if context_id is None:
            return
        # Pipecat only flushes when the audio context is still registered; the turn must end regardless.
        state = self._turns.get(context_id)
        if state is not None:
            await self._end_turn(state)
        if context_id in self._failed_contexts:
            # TOKEN mode registers the turn's last sentence only now; it was never spoken.
            self._drop_unspoken_text(context_id)

    async def _end_turn(self, state: _TurnState) -> None:
        if state.ended or state.cancelled or state.failed:
            return
        state.ended = True
        state.touch()
        try:
            await state.turn.end()
        except Exception as exc:
            await self._fail(state.context_id, exc)

    async def _on_turn_settings_changed(self, changed: dict[str, Any]) -> None:
        # Voice, model and language are fixed per provider turn: finish the current one with the old settings
        # and let the rest of the LLM turn open a new one (as Pipecat's Cartesia service does).
        context_id = self._turn_context_id
        if not context_id or context_id not in self._turns:
            return
        await self._push_sequencer_frames(
            await self._aggregated_frame_sequencer.finalize(context_id), context_id
        )
        await self._end_turn(self._turns[context_id])
        self._turn_context_id = None
        self._turn_context_id = self.create_context_id()

    # -- audio --------------------------------------------------------------------------------------------

    async def _read_turn(self, state: _TurnState) -> None:
        """Push the turn's audio (and the words it carries) into its audio context until the turn is done.

        The reader only iterates: keeping the context from Pipecat's idle timeout while audio is due is
        :meth:`_refresh_contexts`' job (one task per service, not one per chunk). Chunks that are already
        queued behind the one just read go out with it as one frame (see :attr:`coalesce_audio_s`).
        """
        context_id = state.context_id
        rate = self.sample_rate
        clock = state.clock
        bytes_per_s = 2.0 * rate
        take_ready = getattr(state.turn, "take_ready", None)
        limit = max(2, int(self.coalesce_audio_s * rate) * 2)
        append = self.append_to_audio_context
        try:
            async for pcm in state.turn:
                if state.cancelled:
                    return
                if not pcm:
                    continue
                if take_ready is not None and len(pcm) < limit:
                    more = take_ready(limit - len(pcm))
                    if more:
                        pcm += more
                state.touch()
                if state.record is not None:
                    state.record.on_audio()
                await append(context_id, TTSAudioRawFrame(pcm, rate, 1, context_id=context_id))
                words = clock.add_audio(len(pcm) / bytes_per_s)
                if words:
                    await self._push_words(clock, words, context_id)
            if state.cancelled:
                return
            # done: the rest of the words, timed by the real duration; then the stop frame.
            await self._push_words(clock, clock.end_segment(), context_id)
            self._trace(context_id, state.record)  # before the stop frame, which ends the span
            if self.audio_context_available(context_id):
                await append(context_id, TTSStoppedFrame(context_id=context_id))
                await self.remove_audio_context(context_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not state.cancelled:
                await self._fail(context_id, exc)
        finally:
            if self._turns.get(context_id) is state:
                del self._turns[context_id]
            await self._report_usage(context_id)

    def _ensure_refresher(self) -> None:
        """Start the service's audio-context refresher unless it runs (it stops once no turn is open)."""
        if self._refresher is None or self._refresher.done():
            self._refresher = self._spawn(self._refresh_contexts())

    async def _refresh_contexts(self) -> None:
        """Every interval, keep the audio context of each open turn whose audio is due from timing out.

        Pipecat ends an audio context after ``stop_frame_timeout_s`` (3 s) without items and drops audio
        that arrives later for a turn that has ended. Audio is due once the turn has ended (the provider
        bounds that wait), or while text was sent (or audio received) recently; a turn whose LLM went quiet
        for :attr:`open_turn_idle_s` is left to the timeout. A refresh while audio flows is a no-op for
        Pipecat (a keepalive item skipped by its reader), so no per-chunk bookkeeping is needed.
        """
        while self._turns:
            await asyncio.sleep(
                min(self.context_refresh_interval_s, max(0.1, self._stop_frame_timeout_s / 3))
            )
            now = time.monotonic()
            for state in list(self._turns.values()):
                if state.ended or now - state.last_activity < self.open_turn_idle_s:
                    self._refresh_audio_context(state.context_id)

    async def on_audio_context_completed(self, context_id: str) -> None:
        state = self._turns.get(context_id)
        if state is not None and not state.turn.done:
            # Pipecat let the context go while the turn is still open (the LLM stalled for long); the next
            # sentence opens a new audio context with a new time base.
            state.clock.restart()
        await super().on_audio_context_completed(context_id)

    # -- barge-in -----------------------------------------------------------------------------------------

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        """Barge-in: stop the turn's audio now and cancel it on the server in the background."""
        state = self._turns.pop(context_id, None)
        if state is not None:
            self._abandon(state)
            self._end_interrupted_span(context_id)
        await super().on_audio_context_interrupted(context_id)

    async def _handle_interruption(self, frame: InterruptionFrame, direction: FrameDirection) -> None:
        await super()._handle_interruption(frame, direction)
        # Turns whose audio context had already been let go (idle LLM) are interrupted too, unless they
        # belong to uninterruptible speech that Pipecat kept.
        for context_id, state in list(self._turns.items()):
            tts_context = self._tts_contexts.get(context_id)
            if tts_context is None or tts_context.interruptible:
                del self._turns[context_id]
                self._abandon(state)

    def _abandon(self, state: _TurnState) -> None:
        """No more audio of this turn reaches the pipeline; cancel it on the server without waiting."""
        state.cancelled = True
        if state.record is not None:
            state.record.cancelled()
            self._trace(state.context_id, state.record)
        self._spawn(self._cancel_and_reap(state))

    async def _cancel_and_reap(self, state: _TurnState) -> None:
        await self._cancel_turn_quietly(state.turn)
        await self._report_usage(state.context_id)
        reader = state.reader
        if reader is not None and not reader.done():
            # Turn.cancel() ends the iterator; the reader then returns on its own.
            try:
                await asyncio.wait_for(asyncio.shield(reader), timeout=2.0)
            except (asyncio.TimeoutError, Exception):
                await self.cancel_task(reader)

    async def _cancel_turn_quietly(self, turn: Turn) -> None:
        try:
            await turn.cancel()
        except Exception as exc:  # Turn.cancel() should never raise; never let it break the pipeline.
            logger.warning(f"{self} cancelling turn {getattr(turn, 'id', '?')}: {self._redact(exc)}")

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = self.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # -- failures -----------------------------------------------------------------------------------------

    async def _fail(self, context_id: str, exc: BaseException) -> None:
        """The turn behind ``context_id`` failed: report once, end its audio context now, drop its text."""
        state = self._turns.pop(context_id, None)
        if state is not None:
            state.failed = True
            if state.record is not None:
                state.record.failed(exc)
                self._trace(context_id, state.record)
            if state.reader is not None and state.reader is not asyncio.current_task():
                state.cancelled = True
                self._spawn(self._cancel_and_reap(state))
        if not self._mark_failed(context_id):
            return
        await self.stop_all_metrics()
        await self._report_failure(exc, context_id)
        await self._end_failed_audio_context(context_id)


class TurnHttpTTSService(_TurnServiceMixin, TTSService):
    """A Pipecat ``TTSService`` speaking each released sentence with one
    :meth:`~ttsbridge.turns.TurnProvider.synthesize` call (e.g. Nineninesix ``POST /tts/sse``).

    Frames are pushed as the provider yields audio (not after the whole response), word-level
    ``TTSTextFrame``\\ s follow the audio that carries them, and a failed request ends the LLM turn with an
    ``ErrorFrame``, dropping its unspoken text. Same arguments as :class:`TurnTTSService`.

    In ``TextAggregationMode.TOKEN`` streamed tokens are coalesced into clauses at Pipecat's aggregation step
    (as in :class:`TurnTTSService`): every request is rendered on its own, so one request per token would speak
    word fragments. The rest of the turn is spoken when the LLM response ends.
    """

    Settings = TTSSettings
    _settings: TTSSettings

    #: Whether TOKEN mode coalesces tokens into clauses, one request per clause.
    coalesce_tokens: ClassVar[bool] = True

    def __init__(
        self,
        *,
        provider: TurnProvider,
        settings: TTSSettings,
        secrets: Sequence[str | None] = (),
        chars_per_second: float = DEFAULT_CHARS_PER_SECOND,
        coalesce_tokens: bool | None = None,
        **kwargs: Any,
    ) -> None:
        self._init_turn_common(provider, secrets, chars_per_second)
        kwargs.setdefault("push_text_frames", False)
        kwargs.setdefault("push_start_frame", True)
        kwargs.setdefault("push_stop_frames", True)
        super().__init__(settings=settings, **kwargs)
        self._coalesce_at_aggregation(self.coalesce_tokens if coalesce_tokens is None else coalesce_tokens)
        self._clocks: dict[str, WordClock] = {}
        self._records: dict[str, TurnRecord] = {}
        self._stopped = False
        self._sync_provider_options()

    async def start(self, frame: Frame) -> None:  # type: ignore[override]
        await super().start(frame)  # type: ignore[arg-type]
        self._stopped = False

    async def stop(self, frame: EndFrame) -> None:
        # Pipecat waits for every audio context to finish playing; the open LLM turn's context only closes
        # at the end of the response, which an early EndFrame never brings: close it (its audio is queued).
        context_id = self._turn_context_id
        if context_id and self.audio_context_available(context_id):
            await self.append_to_audio_context(context_id, TTSStoppedFrame(context_id=context_id))
            await self.remove_audio_context(context_id)
        await super().stop(frame)
        self._stopped = True
        await self._close_provider()

    async def cancel(self, frame: Frame) -> None:  # type: ignore[override]
        await super().cancel(frame)  # type: ignore[arg-type]
        self._stopped = True
        await self._close_provider()

    async def _close_provider(self) -> None:
        try:
            await self._provider.aclose()
        except Exception as exc:
            logger.warning(f"{self} error closing the provider: {self._redact(exc)}")

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Synthesize one sentence, yielding audio frames as the provider streams them."""
        if context_id in self._failed_contexts or self._stopped:
            # A failed turn's rest is not spoken; nor is text Pipecat flushes after stop() (EndFrame).
            logger.debug(f"{self} not speaking [{text}] (context {context_id})")
            await self._end_failed_audio_context(context_id)
            return
        async for frame in self._speak(text, context_id):
            yield frame

    async def _speak(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """One request for ``text``: its audio frames as they stream in, its words after their audio."""
        clock = self._clocks.get(context_id)
        if clock is None:
            clock = self._clocks[context_id] = WordClock(self._speech_rate)
        clock.add_text(text, boundary=True)
        await self.start_tts_usage_metrics(text)
        rate = self.sample_rate
        record = self._records.get(context_id)
        if record is None:  # one record per audio context (one span): its requests add up
            record = self._records[context_id] = TurnRecord(self._provider, sample_rate=rate)
        record.add_characters(len(text))
        try:
            async for pcm in self._provider.synthesize(text, sample_rate=rate):
                if not pcm:
                    continue
                record.on_audio()
                yield TTSAudioRawFrame(pcm, rate, 1, context_id=context_id)
                # The frame is in the audio context now; its words follow it.
                await self._push_words(clock, clock.add_audio(len(pcm) / (2 * rate)), context_id)
            await self._push_words(clock, clock.end_segment(), context_id)
            record.completed()
            self._trace(context_id, record)
        except Exception as exc:
            self._clocks.pop(context_id, None)
            record.failed(exc)
            self._trace(context_id, record)
            if self._mark_failed(context_id):
                await self.stop_all_metrics()
                await self._report_failure(exc, context_id)
                await self._end_failed_audio_context(context_id)

    async def on_turn_context_completed(self) -> None:
        context_id = self._turn_context_id
        # Every request's audio is yielded inline: Pipecat closes the turn's audio context here, even when
        # the last request yielded no audio (it failed).
        self._is_yielding_frames_synchronously = True
        await super().on_turn_context_completed()
        if context_id is not None:
            self._clocks.pop(context_id, None)
            self._records.pop(context_id, None)
            if context_id in self._failed_contexts:
                self._drop_unspoken_text(context_id)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        self._clocks.pop(context_id, None)
        record = self._records.pop(context_id, None)
        if record is not None:
            record.cancelled()
            self._trace(context_id, record)
            self._end_interrupted_span(context_id)
        await super().on_audio_context_interrupted(context_id)
