"""``tts.synthesize(text)``: :class:`TurnChunkedStream`, the provider's one-shot streaming synthesis."""

from __future__ import annotations

import asyncio
import contextlib

from livekit.agents import APIConnectOptions, tts, utils

from ttsbridge.livekit._errors import to_api_error
from ttsbridge.livekit._owner import StreamOwner
from ttsbridge.livekit._tasks import cancel_pending, deliver_held_audio, within
from ttsbridge.livekit._words import push_timed_words
from ttsbridge.policy.words import WordClock
from ttsbridge.tracing import LIVEKIT_NAMES, TurnRecord, current_span
from ttsbridge.turns import Synthesis

__all__ = ["TurnChunkedStream"]


class TurnChunkedStream(tts.ChunkedStream):
    """``tts.synthesize(text)``: the provider's one-shot streaming synthesis, emitted as it arrives."""

    def __init__(self, *, tts: StreamOwner, input_text: str, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, input_text=input_text, conn_options=conn_options)
        self._tts: StreamOwner = tts

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        owner = self._tts
        request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=request_id,
            sample_rate=owner.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
        )
        if not self._input_text.strip():
            return
        span = current_span()  # LiveKit's tts_request_run span of this attempt
        overrides = owner._open_turn_kwargs()
        record = TurnRecord(owner._turn_provider, sample_rate=owner.sample_rate, overrides=overrides)
        record.add_characters(len(self._input_text))
        source = owner._phrases if owner._phrases is not None else owner._turn_provider  # a known text
        agen = source.synthesize(self._input_text, sample_rate=owner.sample_rate, **overrides)
        pushed = [False]  # audio reached the emitter (then LiveKit must not retry)
        try:
            await self._emit(agen, output_emitter, record, pushed)
            record.completed()
            record.cache = getattr(agen, "cache", None)  # the phrase cache's "hit" / "miss"
        except asyncio.CancelledError:
            record.cancelled()
            raise
        except Exception as exc:
            record.failed(exc)
            err = to_api_error(exc, audio_pushed=pushed[0], secrets=owner._secrets)
            owner._logger.warning(
                "%s synthesize failed: %s",
                owner.provider,
                owner._redact(err),
                extra={"request_id": request_id},
            )
            if pushed[0]:  # what the emitter holds of the audio received goes out before the error
                rest = agen.take_received()  # our timeout gave the synthesis up: what it still holds
                if rest and not cancel_pending():
                    output_emitter.push(rest)
                await deliver_held_audio(output_emitter, max(self._conn_options.timeout, 1.0))
            raise err from None
        finally:
            record.apply(span, LIVEKIT_NAMES)
            with contextlib.suppress(Exception):
                await agen.aclose()
            usage = getattr(agen, "usage", None)  # a phrase cache hit's, done or cut: billed 0
            if usage is not None:  # (before LiveKit's TTSMetrics, whose characters_count it sets)
                owner._report_usage(request_id, usage)

    async def _emit(
        self,
        agen: Synthesis,
        output_emitter: tts.AudioEmitter,
        record: TurnRecord,
        pushed: list[bool],
    ) -> None:
        """Push the synthesis' audio (each chunk within the connect timeout) and its estimated word timing."""
        owner = self._tts
        timeout = self._conn_options.timeout
        timer = WordClock(owner._speech_rate, release="end") if owner._word_timestamps else None
        if timer is not None:
            timer.add_text(self._input_text)
        while True:
            try:
                pcm = await within(agen.__anext__(), timeout)
            except StopAsyncIteration:
                break
            if not pcm:
                continue
            output_emitter.push(pcm)
            pushed[0] = True
            record.on_audio()
            if timer is not None:
                words = timer.add_audio(len(pcm) / 2 / owner.sample_rate)
                if words:
                    push_timed_words(output_emitter, words)
        if timer is not None:
            push_timed_words(output_emitter, timer.end_segment())
        output_emitter.flush()
