"""The per-turn usage ledger of the LiveKit plugins: ``TTSMetrics`` carries the bill, a ``turn_usage`` event
carries the whole :class:`~ttsbridge.policy.usage.TurnUsage`.

LiveKit builds one ``TTSMetrics`` per stream segment with ``characters_count=len(text)`` and the audio it
saw. For a ``tts.stream()`` turn the plugins replace ``characters_count`` with the characters the provider
*bills* (:attr:`~ttsbridge.policy.usage.TurnUsage.characters_billed`) and ``audio_duration`` with the audio
seconds the provider delivered; LiveKit emits no metrics for an attempt that failed (its bill is on the
event). ``tts.on("turn_usage", fn)`` gets every turn's usage when the turn is over (done, cancelled or
failed), before its metrics.

A barged-in turn is billed too, but LiveKit emits no metrics for it (its monitor emits at a segment's final
frame, which an interrupted stream never reaches; LiveKit's Cartesia plugin has the same gap). When a
stream closes on a cancelled turn whose usage no metrics took, the plugin emits one ``TTSMetrics`` for it:
``cancelled=True``, ``characters_count`` = what the provider bills for the cut turn (Kitta: the segments
with audio; Nineninesix: all text sent), ``audio_duration`` = the audio delivered before the cut.

Characters heard: the aligned words the plugin emitted for the turn's audio (``TimedString``\\ s, released as
each word's audio reached LiveKit). LiveKit's session plays them out later and knows the played-out position
on an interruption; an application that wants exactly that can pass it to ``Turn.note_heard``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from livekit.agents.metrics import TTSMetrics
from livekit.agents.metrics.base import Metadata

from ttsbridge.policy.usage import TurnEnd, TurnUsage

__all__ = ["TURN_USAGE_EVENT", "TurnUsageEvents"]

#: The event name (``tts.on(TURN_USAGE_EVENT, ...)``).
TURN_USAGE_EVENT = "turn_usage"
#: Usages kept for metrics that never come (an attempt LiveKit reports no metrics for).
_KEPT = 64


class TurnUsageEvents:
    """Mixin for :class:`~ttsbridge.livekit.TurnTTS` (before ``tts.TTS`` in the bases)."""

    def _usage_pending(self) -> OrderedDict[str, TurnUsage]:
        pending: OrderedDict[str, TurnUsage] | None = getattr(self, "_pending_usage", None)
        if pending is None:
            pending = self._pending_usage = OrderedDict()
        return pending

    def _report_usage(self, request_id: str, usage: TurnUsage) -> None:
        """The turn behind LiveKit's ``request_id`` is over: emit its usage, keep it for its metrics."""
        pending = self._usage_pending()
        pending[request_id] = usage
        while len(pending) > _KEPT:
            pending.popitem(last=False)
        self.emit(TURN_USAGE_EVENT, usage)  # type: ignore[attr-defined]

    def _report_cancelled(
        self,
        request_id: str,
        *,
        segment_id: str,
        ttfb: float,
        duration: float,
        acquire_time: float,
        connection_reused: bool,
    ) -> None:
        """A stream closed: if its turn was cancelled and no metrics took its usage, emit them (cancelled)."""
        usage = self._usage_pending().get(request_id)
        if usage is None or usage.ended is not TurnEnd.CANCELLED:
            return
        metrics = TTSMetrics(
            timestamp=time.time(),
            request_id=request_id,
            segment_id=segment_id,
            ttfb=ttfb,
            duration=duration,
            characters_count=usage.characters_billed,
            audio_duration=usage.audio_seconds,
            cancelled=True,
            label=self._label,  # type: ignore[attr-defined]
            streamed=True,
            acquire_time=acquire_time,
            connection_reused=connection_reused,
            metadata=Metadata(model_name=self.model, model_provider=self.provider),  # type: ignore[attr-defined]
        )
        self.emit("metrics_collected", metrics)  # (takes the usage: emitted once)

    def emit(self, event: Any, *args: Any) -> None:
        if event == "metrics_collected" and args and isinstance(args[0], TTSMetrics):
            usage = self._usage_pending().pop(args[0].request_id, None)
            if usage is not None:
                update = {"characters_count": usage.characters_billed, "audio_duration": usage.audio_seconds}
                args = (args[0].model_copy(update=update), *args[1:])
        super().emit(event, *args)  # type: ignore[misc]
