"""The Pipecat HTTP TTS service over the provider-neutral :mod:`ttsbridge.turns` interface: one
:meth:`~ttsbridge.turns.TurnProvider.synthesize` call per released sentence. What it shares with
:class:`~ttsbridge.pipecat.TurnTTSService` (and the guarantees both give) is in :mod:`ttsbridge.pipecat._mixin`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, ClassVar

from loguru import logger
from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame
from pipecat.services.settings import TTSSettings
from pipecat.services.tts_service import TTSService
from pipecat.utils.tracing.service_decorators import traced_tts

from ttsbridge.pipecat._mixin import _TurnServiceMixin
from ttsbridge.policy.words import WordClock
from ttsbridge.tracing import TurnRecord

__all__ = ["TurnHttpTTSService"]


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

    pipecat_defaults: ClassVar[dict[str, Any]] = {"push_stop_frames": True}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._clocks: dict[str, WordClock] = {}
        self._records: dict[str, TurnRecord] = {}
        self._stopped = False

    async def start(self, frame: Frame) -> None:  # type: ignore[override]
        await super().start(frame)  # type: ignore[arg-type]
        await self._warm_normalizer()
        self._stopped = False

    async def stop(self, frame: EndFrame) -> None:
        # Pipecat waits for every audio context to finish playing; the open LLM turn's context only closes
        # at the end of the response, which an early EndFrame never brings: close it (its audio is queued).
        if self._turn_context_id:
            await self._close_audio_context(self._turn_context_id)
        await super().stop(frame)
        self._stopped = True
        await self._close_provider()

    async def cancel(self, frame: Frame) -> None:  # type: ignore[override]
        await super().cancel(frame)  # type: ignore[arg-type]
        self._stopped = True
        await self._close_provider()

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

    async def _speak(self, written: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        """One request for ``written`` in its spoken form (each request renders on its own, so it is
        normalized whole): its audio frames as they stream in, its words (the LLM's) after their audio."""
        clock = self._clocks.get(context_id)
        if clock is None:
            clock = self._clocks[context_id] = WordClock(self._speech_rate)
        stream = self._text_stream()
        piece = stream.push(written) + stream.flush()
        clock.add_spans(piece.spans, boundary=True)
        text = piece.sendable
        if not text.strip():  # nothing to say (an emoji alone): its words go with no audio
            await self._push_words(clock, clock.end_segment(), context_id)
            return
        # A TTSSpeakFrame's whole text goes through the phrase cache: Pipecat's usage metric (len(text), sent
        # first as without a cache) waits for the lookup and is left out for a hit only.
        known = self._phrase_known()
        billed = not known  # settled: the metric is reported (or, for a hit, left out)
        if not known:
            await self.start_tts_usage_metrics(text)
        rate = self.sample_rate
        record = self._records.get(context_id)
        if record is None:  # one record per audio context (one span): its requests add up
            record = self._records[context_id] = TurnRecord(self._provider, sample_rate=rate)
        record.add_characters(len(text))
        source = self._phrases if known and self._phrases is not None else self._provider  # LLM text: live
        audio = source.synthesize(text, sample_rate=rate)
        try:
            async for pcm in audio:
                if not billed:
                    billed = await self._bill_known(text, audio)
                if not pcm:
                    continue
                record.on_audio()
                yield TTSAudioRawFrame(pcm, rate, 1, context_id=context_id)
                # The frame is in the audio context now; its words follow it.
                await self._push_words(clock, clock.add_audio(len(pcm) / (2 * rate)), context_id)
            await self._push_words(clock, clock.end_segment(), context_id)
            if not billed:
                await self._bill_known(text, audio)
            record.completed()
            record.cache = getattr(audio, "cache", None)
            self._trace(context_id, record)
        except Exception as exc:
            if (
                not billed
            ):  # a miss that failed was sent (and billed by the server's rules), as without a cache
                await self._bill_known(text, audio)
            self._clocks.pop(context_id, None)
            record.cache = getattr(audio, "cache", None)
            record.failed(exc)
            self._trace(context_id, record)
            await self._fail_context(context_id, exc)

    async def _bill_known(self, text: str, audio: object) -> bool:
        """Pipecat's usage metric for a known text once its lookup is over (the synthesis yielded, ended or
        failed): ``len(text)`` as without a cache, unless it was a hit (billed nothing). True: settled."""
        if getattr(audio, "cache", None) != "hit":
            await self.start_tts_usage_metrics(text)
        return True

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
