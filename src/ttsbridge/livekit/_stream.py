"""``tts.stream()``: :class:`TurnSynthesizeStream`, one provider turn per stream (see :mod:`ttsbridge.livekit`).

One attempt of ``_run`` is an :class:`_Attempt`: three tasks (input -> sentences, sentences -> turn, turn ->
emitter) over the attempt's state, supervised by :func:`~ttsbridge.livekit._tasks.supervise`. The stream's
``APIConnectOptions.timeout`` is the turn's one audio-owed deadline (``open_turn(timeout=...)``), kept by the
provider's protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from livekit.agents import APIConnectOptions, tokenize, tts, utils

from ttsbridge.livekit._errors import to_api_error
from ttsbridge.livekit._owner import StreamOwner
from ttsbridge.livekit._tasks import cancel_pending, deliver_held_audio, supervise, within
from ttsbridge.livekit._words import push_timed_words
from ttsbridge.policy.chunks import HoldWait, Playout, hold_while_ahead, joiner, pcm16_bytes
from ttsbridge.policy.words import TimedWord, WordClock
from ttsbridge.text.spans import Normalized
from ttsbridge.tracing import LIVEKIT_NAMES, TurnRecord, current_span
from ttsbridge.turns import Turn

__all__ = ["TurnSynthesizeStream"]

#: Bound on one pushed buffer made of chunks already queued when the first was read (never waits).
_COALESCE_S = 0.1
#: Bound on one pushed buffer of what queued during a hold, while the turn is safely ahead of playback:
#: everything in it had arrived before it is pushed (its size delays nothing), and the emitter re-frames it.
_HOLD_FRAME_S = 0.5


class TurnSynthesizeStream(tts.SynthesizeStream):
    """``tts.stream()``: one provider turn per stream (see the package docstring)."""

    def __init__(self, *, tts: StreamOwner, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=tts, conn_options=conn_options)
        self._tts: StreamOwner = tts
        #: the turn of the current attempt (tests and debugging)
        self.turn: Turn | None = None
        self._attempt: _Attempt | None = None

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        self._attempt = _Attempt(self, output_emitter)
        await self._attempt.run()

    async def aclose(self) -> None:
        await super().aclose()
        attempt = self._attempt
        if attempt is None or attempt.turn is None or attempt.failed:  # (a failure's bill is on the event)
            return
        now = time.perf_counter()
        started = self._started_time or now  # (LiveKit's, reset once its metrics are emitted)
        first = attempt.first_audio_at
        self._tts._report_cancelled(  # a barge-in: billed, so reported (see _usage)
            attempt.request_id,
            segment_id=attempt.turn.id or attempt.request_id,
            ttfb=first - started if first is not None else -1.0,
            duration=now - started,
            acquire_time=self._acquire_time,
            connection_reused=self._connection_reused,
        )


class _Attempt:
    """One attempt of :meth:`TurnSynthesizeStream._run` (LiveKit's retry loop makes a new one per retry)."""

    def __init__(self, stream: TurnSynthesizeStream, output_emitter: tts.AudioEmitter) -> None:
        owner = stream._tts
        self.stream, self.owner, self.emitter = stream, owner, output_emitter
        self.request_id = utils.shortuuid()
        output_emitter.initialize(
            request_id=self.request_id,
            sample_rate=owner.sample_rate,
            num_channels=1,
            mime_type="audio/pcm",
            stream=True,
        )
        self.timeout = stream._conn_options.timeout
        self.timer = WordClock(owner._speech_rate, release="end") if owner._word_timestamps else None
        sentences: tokenize.SentenceStream = owner._sentence_tokenizer.stream()
        if owner._stream_pacer is not None:
            # LiveKit's pacer: the first sentence at once, the rest batched while enough audio is left to play.
            sentences = owner._stream_pacer.wrap(sent_stream=sentences, audio_emitter=output_emitter)
        self.sentences = sentences
        self.has_text = asyncio.Event()  # set on the first non-blank text, or when the input ends without any
        self.turn_fut: asyncio.Future[Turn | None] = asyncio.get_running_loop().create_future()
        self.text = self.audio = self.cancelled = False
        self.pushed: list[str] = []  # the input text, for the phrase cache
        self.input_done = False  # the whole input (and its end) arrived
        self.turn: Turn | None = None
        self.span = current_span()  # LiveKit's tts_request_run span of this attempt
        self.record: TurnRecord | None = None
        self.first_audio_at: float | None = None  # perf_counter of the first audio pushed
        self.failed = False  # the attempt raised (not a cancellation)

    # -- the attempt

    async def run(self) -> None:
        owner = self.owner
        failed = False
        input_t = asyncio.create_task(self._input_task(), name="TurnSynthesizeStream.input")
        send_t = asyncio.create_task(self._send_task(), name="TurnSynthesizeStream.send")
        recv_t = asyncio.create_task(self._recv_task(), name="TurnSynthesizeStream.recv")
        try:
            await supervise(send_t, recv_t, input_t)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            failed = self.failed = True
            if self.record is not None:
                self.record.failed(exc)
            err = to_api_error(exc, audio_pushed=self.audio, secrets=owner._secrets)
            owner._logger.warning(
                "%s turn %s failed: %s",
                owner.provider,
                self.turn.id if self.turn is not None else "-",
                owner._redact(err),
                extra={"request_id": self.request_id},
            )
            raise err from None
        finally:
            if failed and self.audio and self.turn is not None and not cancel_pending():
                rest = self.turn.take_received()  # our timeout gave up a stalled turn: what it still holds
                if rest:
                    self.emitter.push(rest)
            await self._cancel_turn()
            self._trace()
            await self.sentences.aclose()
            await utils.aio.gracefully_cancel(input_t, send_t, recv_t)
            if failed and self.audio:  # (a cancellation, barge-in, wants none of it)
                await deliver_held_audio(self.emitter, max(self.timeout, 1.0))
            await self._cancel_turn()  # a turn whose opening completed while the tasks were being stopped
            self._trace()
            if self.turn is not None:
                owner._report_usage(self.request_id, self.turn.usage)
            if failed and cancel_pending():  # closed while the failure was being cleaned up: a cancellation
                raise asyncio.CancelledError

    async def _cancel_turn(self) -> None:
        turn = self.turn
        if turn is not None and not turn.done:
            self.cancelled = True
            # barge-in (or our own failure): stop the generation, keep the provider's connection
            with contextlib.suppress(Exception):
                await asyncio.wait_for(turn.cancel(), max(self.timeout, 1.0))

    def _trace(self) -> None:
        record, turn = self.record, self.turn
        if record is not None:
            if self.cancelled:
                record.cancelled()
            note = getattr(self.emitter, "_note_provider_request_id", None)  # LiveKit >= 1.8
            if note is not None and turn is not None and turn.id:  # a retry moved the turn to a fresh id
                note(turn.id)
            record.apply(self.span, LIVEKIT_NAMES)

    def _emit_words(self, words: list[TimedWord]) -> None:
        push_timed_words(self.emitter, words)
        if self.turn is not None:
            self.turn.note_heard(sum(len(w.text) for w in words))  # aligned words emitted: see _usage

    # -- the three tasks

    async def _input_task(self) -> None:
        stream = self.stream
        async for data in stream._input_ch:
            if isinstance(data, stream._FlushSentinel):
                if self.text:
                    break  # LiveKit 1.8: one segment per stream, text after a flush is dropped
                continue
            if not self.text and data.strip():
                self.text = True
                self.has_text.set()
            self.pushed.append(data)
            self.sentences.push_text(data)
        self.input_done = True
        self.sentences.end_input()
        self.has_text.set()

    def _known_phrase(self) -> list[Normalized] | None:
        """The sentences of the whole input, in their spoken form, when it all arrived before anything went
        out (``session.say``) and the provider has a phrase cache; None otherwise (LLM text: live)."""
        if not self.input_done or self.owner._phrases is None:
            return None
        return self.owner._known_phrase("".join(self.pushed)) or None

    async def _open(self, phrase: list[Normalized] | None = None) -> Turn:
        owner, stream = self.owner, self.stream
        provider, phrases = owner._turn_provider, owner._phrases
        overrides = owner._open_turn_kwargs()
        self.record = TurnRecord(provider, sample_rate=owner.sample_rate, overrides=overrides)
        started = time.perf_counter()
        rate = owner.sample_rate
        segments = [p.spoken for p in phrase] if phrase is not None else []  # keyed on the spoken form
        opened = await within(
            phrases.open_phrase(
                "".join(segments), sample_rate=rate, segments=segments, timeout=self.timeout, **overrides
            )
            if phrase is not None and phrases is not None
            else provider.open_turn(sample_rate=rate, timeout=self.timeout, **overrides),
            self.timeout,
            discard=lambda t: t.cancel(),
        )
        self.turn = stream.turn = opened
        stream._acquire_time = time.perf_counter() - started
        stream._connection_reused = opened.connection_reused
        self.emitter.start_segment(segment_id=opened.id or self.request_id)
        self.record.bind(opened)
        self._trace()
        owner._logger.debug("turn opened", extra={"turn_id": opened.id, "request_id": self.request_id})
        return opened

    async def _send_task(self) -> None:
        await self.has_text.wait()
        if not self.text:
            self.turn_fut.set_result(None)
            return
        phrase = self._known_phrase()
        try:
            opened = await self._open(phrase)
        except BaseException:
            if not self.turn_fut.done():
                self.turn_fut.set_result(None)
            raise
        self.turn_fut.set_result(opened)
        if self.timer is not None:
            self.timer.pieces = opened.reports_send_ends  # (before any text: see WordClock.pieces)
        if phrase is not None:  # a known phrase is sent as the key has it: its sentences, unpaced
            for piece in phrase:
                await self._send(opened, piece)
        else:  # each sentence in its spoken form (ttsbridge.text); what a cut number held goes at the end
            text = self.owner._text_stream()
            async for ev in self.sentences:  # (the tokenizer's sentences are whole)
                await self._send(opened, text.push(ev.token + " ", whole=True))
            await self._send(opened, text.flush())
        await opened.end()

    async def _send(self, opened: Turn, piece: Normalized) -> None:
        """The spoken form of ``piece`` to the turn; word timing learns of it (the LLM's words, the spoken
        weights: a rewritten span is one unit, released once all of it was played)."""
        spoken = piece.sendable
        if not piece:
            return
        opened.note_written(len(piece.written))
        if spoken:
            self.stream._mark_started()
            await opened.send(spoken)
        if self.timer is not None:
            self.timer.add_spans(piece.spans, piece=bool(spoken))

    async def _recv_task(self) -> None:
        opened = await self.turn_fut
        if opened is None:
            return
        rate = opened.sample_rate or self.owner.sample_rate
        bytes_per_s = 2.0 * rate
        push, timer = self.emitter.push, self.timer
        join = joiner(opened, rate=rate, coalesce_s=_COALESCE_S)  # chunks already queued behind
        limit = pcm16_bytes(_COALESCE_S, rate)
        # safely ahead of playback: read less often, push what queued meanwhile (policy/chunks.py:Playout)
        playout = Playout() if self.owner.hold_when_ahead else None
        hold_max = max(limit, pcm16_bytes(_HOLD_FRAME_S, rate))
        clock = asyncio.get_running_loop().time

        def out(pcm: bytes) -> None:
            push(pcm)
            if not self.audio:
                self.first_audio_at = time.perf_counter()
            self.audio = True
            if self.record is not None:
                self.record.on_audio()
            if timer is not None:
                words = timer.add_audio(len(pcm) / bytes_per_s)
                words += timer.complete_rendered(opened.rendered)  # (Kitta: a segment's audio ended)
                if words:
                    self._emit_words(words)

        async def out_held(pcm: bytes) -> None:  # (hold_while_ahead awaits its out; this one never waits)
            out(pcm)

        take = opened.take_ready
        hold = HoldWait()  # ends at once when the turn's end is known: no more chunks to wait for
        opened.add_done_callback(lambda _turn: hold.release())

        async for pcm in opened:
            if not pcm:
                continue
            n = len(pcm)
            pcm = join(pcm)
            out(pcm)
            if playout is None:
                continue
            playout.push(len(pcm) / bytes_per_s, clock())
            if n != len(pcm):  # chunks were queued: a burst, or a busy loop; joining already saves the pushes
                playout = None  # (no holds in this turn: their wake-ups would land amid the burst)
                continue
            if 2 * n > limit:  # a chunk too large for a buffer to gather more
                continue
            # (the cheap check first: at real time no hold is ever due, and no coroutine is made per chunk)
            if playout.hold(clock()) and not await hold_while_ahead(
                playout, clock, hold, take, out_held, hold_max, bytes_per_s
            ):
                playout = None  # no more holds in this turn (never pace audio already received)
        if timer is not None and opened.done and not self.cancelled:  # completed, not cut short
            self._emit_words(timer.end_segment())  # the rest by the real duration; calibrates the rate
