"""The per-turn usage ledger of the Pipecat WebSocket services: reported through Pipecat's usage metrics and
an ``on_turn_usage`` event handler.

Pipecat's own TTS usage metric is ``len(text)`` of every request (or of the whole streamed text in TOKEN
mode). Here it is replaced by one ``TTSUsageMetricsData`` per turn whose ``value`` is the characters the
provider *bills* (:attr:`~ttsbridge.policy.usage.TurnUsage.characters_billed`), reported once the turn is
over and its audio context has finished playing (or was interrupted), when the bill is known. The whole
:class:`~ttsbridge.policy.usage.TurnUsage` goes to ``on_turn_usage(service, usage)``.

Characters heard are counted here: the words the service timed (``add_word_timestamps``) are heard when
Pipecat plays them out of the audio context (``_add_word_timestamps``, in playback order); an interruption
drops the rest. With ``word_timestamps=False`` no word is played: a context played to its end counts every
word timed for it, an interrupted or failed one none (as Pipecat then commits the whole text, or nothing).

On a carrier call with playback acknowledgements (docs/telephony.md) a turn's playback is over when the
carrier says so (its final mark, a clear, the end of the call), and its characters heard are those of the
words that start at or before the position the carrier acknowledged (the estimate above when it never did).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from loguru import logger
from pipecat.frames.frames import MetricsFrame
from pipecat.metrics.metrics import TTSUsageMetricsData

from ttsbridge.policy.usage import TurnUsage
from ttsbridge.policy.words import TimedWord, WordClock
from ttsbridge.turns import Turn

__all__ = ["TurnUsageMixin"]

#: How many finished turns' ledgers may wait for their report (a context that never completes).
_LEDGERS_KEPT = 256


@dataclass(eq=False)
class _Ledger:
    turn: Turn
    words: deque[TimedWord] = field(default_factory=deque)  # timed, not yet played
    playback_over: bool = False
    #: the carrier reports this turn's playback: heard is counted from its position when it is over
    by_carrier: bool = False
    #: (by_carrier) the words Pipecat played out of the audio context: the push-time estimate
    played: list[TimedWord] = field(default_factory=list)


def _carrier_heard(ledger: _Ledger, *, completed: bool, heard_s: float | None) -> list[TimedWord]:
    """The words heard of a turn whose playback the carrier reported: those starting at or before the position
    it acknowledged; without one, the estimate (every word of a turn played to its end, else those played)."""
    timed = [*ledger.played, *ledger.words]
    if heard_s is not None:
        return [w for w in timed if w.start <= heard_s + 1e-3]
    return timed if completed else list(ledger.played)


class TurnUsageMixin:
    """Usage reporting for :class:`~ttsbridge.pipecat.TurnTTSService` (must come before the Pipecat base)."""

    _ledgers: dict[str, _Ledger]

    def _init_usage(self) -> None:
        self._ledgers = {}
        self._register_event_handler("on_turn_usage")  # type: ignore[attr-defined]

    @property
    def _streamed_text(self) -> str:
        """Pipecat reports ``len`` of the streamed text at the end of a TOKEN-mode turn; the billed characters
        are reported instead, so it never accumulates."""
        return ""

    @_streamed_text.setter
    def _streamed_text(self, value: str) -> None:
        pass

    async def start_tts_usage_metrics(self, text: str) -> None:
        """Not per request: one usage metric per turn, with the characters billed (see the module docs)."""

    def _track_usage(self, context_id: str, turn: Turn) -> None:
        self._ledgers[context_id] = _Ledger(turn)
        while len(self._ledgers) > _LEDGERS_KEPT:
            self._ledgers.pop(next(iter(self._ledgers)))

    async def _push_words(self, clock: WordClock, words: list[TimedWord], context_id: str) -> None:
        ledger = self._ledgers.get(context_id)
        if ledger is not None and self.audio_context_available(context_id):  # type: ignore[attr-defined]
            ledger.words.extend(words)
        await super()._push_words(clock, words, context_id)  # type: ignore[misc]

    async def _add_word_timestamps(
        self, word_times: list[tuple[str, float]], context_id: str | None = None, **kwargs: Any
    ) -> None:
        played = self._word_timestamp_tracker.started  # type: ignore[attr-defined]
        await super()._add_word_timestamps(word_times, context_id, **kwargs)  # type: ignore[misc]
        ledger = self._ledgers.get(context_id) if played and context_id else None
        if ledger is not None:
            for _ in word_times:
                if ledger.words:
                    word = ledger.words.popleft()
                    if ledger.by_carrier:
                        ledger.played.append(word)
                    else:
                        ledger.turn.note_heard(len(word.text))

    def _usage_by_carrier(self, context_id: str) -> None:
        """The carrier reports ``context_id``'s playback: count what was heard when it says it is over."""
        ledger = self._ledgers.get(context_id)
        if ledger is not None:
            ledger.by_carrier = True

    def _awaits_carrier(self, context_id: str) -> bool:
        """The carrier has yet to report the end of ``context_id``'s playback (see the telephony side)."""
        return False

    async def on_audio_context_completed(self, context_id: str) -> None:
        await super().on_audio_context_completed(context_id)  # type: ignore[misc]
        if not self._awaits_carrier(context_id):
            await self._playback_over(context_id, completed=True)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        await super().on_audio_context_interrupted(context_id)  # type: ignore[misc]
        if not self._awaits_carrier(context_id):
            await self._playback_over(context_id, completed=False)

    async def _playback_over(self, context_id: str, *, completed: bool, heard_s: float | None = None) -> None:
        """The turn's playback is over (``completed``: played to its end). ``heard_s``: the position the
        carrier acknowledged (s of the turn's audio), for a turn whose playback it reports."""
        ledger = self._ledgers.get(context_id)
        if ledger is not None and not (ledger.by_carrier and ledger.playback_over):
            ledger.playback_over = True
            failed = context_id in self._failed_contexts  # type: ignore[attr-defined]
            if ledger.by_carrier:  # once: the carrier's report is final
                for word in _carrier_heard(ledger, completed=completed and not failed, heard_s=heard_s):
                    ledger.turn.note_heard(len(word.text))
            elif completed and not failed and not self._word_timestamps:  # type: ignore[attr-defined]
                # No word events were played: a context played to its end was heard whole (what Pipecat
                # commits to the LLM context then); an interrupted or failed one counts nothing, as nothing of
                # it is committed.
                for word in ledger.words:
                    ledger.turn.note_heard(len(word.text))
            ledger.words.clear()  # an interruption dropped them; a completed context played them all
            await self._report_usage(context_id)

    async def _report_usage(self, context_id: str) -> None:
        """Report the turn's usage once it is over and its playback too (called wherever either happens)."""
        ledger = self._ledgers.get(context_id)
        if ledger is None or not ledger.playback_over or not ledger.turn.done:
            return
        del self._ledgers[context_id]
        usage = ledger.turn.usage
        try:
            await self._push_usage_metrics(usage)
            await self._call_event_handler("on_turn_usage", usage)  # type: ignore[attr-defined]
        except Exception as exc:  # reporting must never break the pipeline
            logger.warning(f"{self} usage report of context {context_id} failed: {type(exc).__name__}")

    async def _push_usage_metrics(self, usage: TurnUsage) -> None:
        if not (self.can_generate_metrics() and self.usage_metrics_enabled):  # type: ignore[attr-defined]
            return
        metrics = self._metrics  # type: ignore[attr-defined]
        data = TTSUsageMetricsData(
            processor=metrics._processor_name(), model=metrics._model_name(), value=usage.characters_billed
        )
        logger.debug(f"{self} usage: {usage}")
        await self.push_frame(MetricsFrame(data=[data]))  # type: ignore[attr-defined]
