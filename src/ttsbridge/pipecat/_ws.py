"""The Pipecat WebSocket TTS service over the provider-neutral :mod:`ttsbridge.turns` interface.

:class:`TurnTTSService` (a Pipecat ``WebsocketTTSService``) maps one Pipecat audio context (one LLM turn, or
one ``TTSSpeakFrame``) to one provider :class:`~ttsbridge.turns.Turn`: its lifecycle and text side are here,
its audio side (reader, refresher, barge-in, failure) in :mod:`ttsbridge.pipecat._ws_audio`, what it shares
with :class:`~ttsbridge.pipecat.TurnHttpTTSService` in :mod:`ttsbridge.pipecat._mixin` (with the guarantees
both give, whatever the provider).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncGenerator
from typing import Any, ClassVar

from loguru import logger
from pipecat.frames.frames import EndFrame, Frame
from pipecat.services.settings import TTSSettings
from pipecat.utils.tracing.service_decorators import traced_tts

from ttsbridge.pipecat._ws_audio import _TurnAudioService, _TurnState
from ttsbridge.policy.words import WordClock
from ttsbridge.text.spans import Normalized
from ttsbridge.text.stream import StreamNormalizer
from ttsbridge.tracing import TurnRecord
from ttsbridge.turns import Turn

__all__ = ["TurnTTSService"]


class TurnTTSService(_TurnAudioService):
    """A Pipecat ``WebsocketTTSService`` over a :class:`~ttsbridge.turns.TurnProvider`.

    Pipecat's audio contexts map one-to-one onto provider turns: the context id Pipecat assigns to an LLM turn
    (or a ``TTSSpeakFrame``) opens one provider turn on its first sentence, every further sentence is sent on
    it, and the end of the LLM turn ends it. The provider owns the connection (pooled, reconnected on demand,
    refreshed before a server idle close); this service never reconnects on its own.

    Args:
        provider: the provider to speak through (owned: closed when the pipeline stops).
        secrets: strings to mask in every log line and error text (the API key).
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache`: a ``TTSSpeakFrame``'s text goes through it (the
            provider wrapped in a :class:`~ttsbridge.cache.CachedProvider`; docs/cache.md).
        chars_per_second: prior speaking rate for word timing, until completed turns calibrate it.
        coalesce_tokens: in ``TextAggregationMode.TOKEN``, hold streamed tokens until a clause ends, at
            Pipecat's aggregation step (before its text filters and transforms run), for providers that
            render every send on its own. Defaults to the class attribute.
        **kwargs: passed to Pipecat's ``WebsocketTTSService`` / ``TTSService`` (``sample_rate``,
            ``settings``, ``text_aggregation_mode``, ``text_transforms``...).
    """

    Settings = TTSSettings
    _settings: TTSSettings

    pipecat_defaults: ClassVar[dict[str, Any]] = {
        "push_stop_frames": False,  # the reader pushes a turn's TTSStoppedFrame behind its audio
        "pause_frame_processing": False,
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._turns = {}
        self._background = set()
        self._refresher = None
        self._init_usage()

    # -- lifecycle ----------------------------------------------------------------------------------------

    async def start(self, frame: Frame) -> None:  # type: ignore[override]
        await super().start(frame)  # type: ignore[arg-type]
        await self._connect()
        await self._warm_normalizer()  # after the connection: it never delays the socket

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
        await self._close_provider()
        await self._call_event_handler("on_disconnected")

    async def _receive_messages(self) -> None:
        """Unused: the provider reads the connection; each turn's audio is read by its own task."""

    # -- synthesis ----------------------------------------------------------------------------------------

    @traced_tts
    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """Send ``text`` on the turn behind ``context_id``, opening the turn on its first sentence."""
        if context_id in self._failed_contexts or self._disconnecting:
            # A failed turn's rest is not spoken (and not put in the context); nor is the aggregator's last text
            # that Pipecat flushes after stop() on an EndFrame that closed an LLM turn early (the service has
            # shut down by then: it is not opened on a new connection).
            logger.debug(f"{self} not speaking [{text}] (context {context_id})")
            await self._end_failed_audio_context(context_id)
            yield None
            return
        state = self._turns.get(context_id)
        opened = state is None
        if state is None:
            # the spoken form first: a known phrase is looked up by it
            known, stream = self._phrase_known(), self._text_stream()
            piece = stream.push(text, whole=not self._is_streaming_tokens)
            piece += stream.flush() if known else Normalized()
            state = await self._start_turn(context_id, stream, phrase=piece.spoken if known else None)
            if state is None:  # the turn could not be opened (reported)
                yield None
                return
        else:  # (a sentence is whole; a TOKEN-mode clause may end inside a number: "$1," + "234")
            piece = state.text.push(text, whole=not self._is_streaming_tokens)
        state.touch()
        failure: Exception | None = None
        try:
            await self._send_piece(state, piece)
        except Exception as exc:
            failure = exc
        if opened:  # after the first request is out: the turn's audio waits in its stream until read
            self._start_reader(state)
        if failure is not None:
            await self._fail(context_id, failure)
        yield None

    async def _send_piece(self, state: _TurnState, piece: Normalized) -> None:
        """Send the spoken form of ``piece``; word timing learns of it (the LLM's words, the spoken weights)
        before any of its audio can arrive."""
        spoken = piece.sendable
        state.clock.add_spans(piece.spans, boundary=not self._is_streaming_tokens, piece=bool(spoken))
        state.turn.note_written(len(piece.written))
        if spoken:
            await state.turn.send(spoken)

    async def _start_turn(
        self, context_id: str, text: StreamNormalizer, phrase: str | None = None
    ) -> _TurnState | None:
        """Open the provider turn behind ``context_id`` (its reader is started by :meth:`_start_reader`, once
        its first text is sent); None (reported) if it failed. ``text``: the turn's normalizer; ``phrase``: the
        spoken form of a ``TTSSpeakFrame``'s whole text, looked up in the phrase cache."""
        record = TurnRecord(self._provider, sample_rate=self.sample_rate)
        try:
            turn = await self._open_turn(phrase)
        except Exception as exc:
            record.failed(exc)
            self._trace(context_id, record)
            await self._fail(context_id, exc)
            return None
        record.bind(turn)
        self._trace(context_id, record)
        self._track_usage(context_id, turn)
        state = _TurnState(
            context_id=context_id,
            turn=turn,
            clock=WordClock(self._speech_rate, pieces=turn.reports_send_ends, hold=True),
            record=record,
            text=text,
        )
        state.touch()
        self._turns[context_id] = state
        return state

    def _start_reader(self, state: _TurnState) -> None:
        state.reader = self.create_task(self._read_turn(state), name=f"turn-{state.context_id[:8]}")
        self._ensure_refresher()

    async def _open_turn(self, phrase: str | None = None) -> Turn:
        """Open a provider turn, awaited in this task: no task and no loop hop on the way out.

        A cancelled opening (barge-in) yields no turn, so there is none to cancel: ``open_turn`` is
        cancellation-safe (every provider creates its :class:`Turn` after its last await and leaves nothing
        half-open when an await is cancelled: a cancelled connect is closed, never pooled). ``phrase`` (a whole
        known text) goes through the phrase cache: a hit is a turn that sends nothing.
        """
        if phrase is not None and self._phrases is not None:
            return await self._phrases.open_phrase(phrase, sample_rate=self.sample_rate)
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
            rest = state.text.flush()  # what the normalizer held for the next piece (a number cut mid-way)
            if rest:
                await self._send_piece(state, rest)
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
