"""The audio side of :class:`~ttsbridge.pipecat.TurnTTSService`: one open turn's state, the task that reads
its audio into its Pipecat audio context, the one refresher per service that keeps due audio's context from
Pipecat's idle timeout, barge-in and turn failure. See :mod:`ttsbridge.pipecat._mixin` for the guarantees.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from loguru import logger
from pipecat.frames.frames import Frame, InterruptionFrame, TTSAudioRawFrame
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.tts_service import WebsocketTTSService

from ttsbridge.pipecat._mixin import _TurnServiceMixin
from ttsbridge.pipecat._usage import TurnUsageMixin
from ttsbridge.policy.chunks import HoldWait, Playout, hold_while_ahead, joiner, pcm16_bytes
from ttsbridge.policy.words import WordClock
from ttsbridge.text.stream import StreamNormalizer
from ttsbridge.tracing import TurnRecord
from ttsbridge.turns import Turn

if TYPE_CHECKING:
    from ttsbridge.pipecat.telephony import ServicePlayback

__all__: list[str] = []


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
    #: the reader's hold while the turn is safely ahead; the turn's end (all its audio arrived) and a
    #: barge-in end it at once
    hold: HoldWait = field(default_factory=HoldWait)
    #: monotonic time of the first audio since the clock's time base (about Pipecat's word-timestamp base)
    first_audio_at: float | None = None
    #: the turn's text normalizer: the LLM's pieces in, their spoken form out (ttsbridge.text)
    text: StreamNormalizer = field(default_factory=lambda: StreamNormalizer(None))

    def touch(self) -> None:
        self.last_activity = time.monotonic()


class _TurnAudioService(TurnUsageMixin, _TurnServiceMixin, WebsocketTTSService):
    """The turn-audio half of :class:`~ttsbridge.pipecat.TurnTTSService` (which adds the lifecycle and the
    text side); not used on its own."""

    _turns: dict[str, _TurnState]
    _background: set[asyncio.Task[Any]]
    _refresher: asyncio.Task[None] | None

    #: How often an audio context that waits for due audio is kept from Pipecat's 3-second idle timeout.
    context_refresh_interval_s: ClassVar[float] = 1.0
    #: How long an open turn (not yet ended) may go without text or audio before its audio context is left to
    #: Pipecat's idle timeout (the LLM has stalled; the next sentence reopens the context).
    open_turn_idle_s: ClassVar[float] = 10.0
    #: Bound on one audio frame made of chunks that were already queued when the first of them was read
    #: (never waits for audio: a chunk that is alone goes out alone): the turn's ``take_ready(max_bytes)``
    #: (see :meth:`_read_turn`).
    coalesce_audio_s: ClassVar[float] = 0.1
    #: Once a turn's audio is safely ahead of real-time playback (a server faster than real time), read it
    #: less often: wait a little and push what arrived meanwhile as frames of at most
    #: :attr:`hold_frame_s` (:class:`~ttsbridge.policy.chunks.Playout`; the first frame is never held).
    hold_when_ahead: ClassVar[bool] = True
    #: Bound on one frame of what queued during a hold, and of what was queued behind a chunk once a turn's
    #: audio came in a burst (after its first frame; with ``hold_when_ahead``). Everything in it had arrived
    #: before it is pushed, so its size delays nothing; larger frames cost the pipeline fewer per-frame steps
    #: (Pipecat's output transport re-chunks audio into its own 10 ms multiples, and drops what it queued on an
    #: interruption).
    hold_frame_s: ClassVar[float] = 0.5
    #: A word whose time the provider's report of its segment's end will correct (WordClock ``hold``) is
    #: released at the latest this long before its estimated start is played (Pipecat commits a word whose
    #: timestamp has passed at once). The play time is taken from the turn's first audio (Pipecat's word
    #: time base for a context that plays at once; a queued context's is later, so its words go early).
    word_due_margin_s: ClassVar[float] = 0.15
    #: The carrier call this service speaks on, when its serializer is a ``PlaybackAcks`` (docs/telephony.md):
    #: looked up once, at the first audio.
    _phone: ServicePlayback | None = None
    _phone_worker: object = None

    # -- audio --------------------------------------------------------------------------------------------

    async def _read_turn(self, state: _TurnState) -> None:
        """Push the turn's audio (and the words it carries) into its audio context until the turn is done.

        The reader only iterates: keeping the context from Pipecat's idle timeout while audio is due is
        :meth:`_refresh_contexts`' job (one task per service, not one per chunk). Chunks that are already
        queued behind the one just read go out with it as one frame (see :attr:`coalesce_audio_s`).
        """
        context_id, clock = state.context_id, state.clock
        try:
            await self._pump_audio(state)
            if state.cancelled:
                return
            # done: the rest of the words, timed by the real duration; then the stop frame.
            await self._push_words(clock, clock.end_segment(), context_id)
            self._trace(context_id, state.record)  # before the stop frame, which ends the span
            await self._close_audio_context(context_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if not state.cancelled:
                await self._fail(context_id, exc)
        finally:
            if self._turns.get(context_id) is state:
                del self._turns[context_id]
            await self._report_usage(context_id)

    async def _pump_audio(self, state: _TurnState) -> None:
        """The turn's audio into its context, until its iterator ends (or a barge-in): chunks queued behind
        the one read are joined to it; once safely ahead of playback, holds between reads."""
        rate = self.sample_rate
        bytes_per_s = 2.0 * rate
        join = joiner(state.turn, rate=rate, coalesce_s=self.coalesce_audio_s)  # chunks queued behind
        out = functools.partial(self._push_audio, state, rate)
        take_ready = state.turn.take_ready
        # safely ahead of playback: read less often, push what queued meanwhile (policy/chunks.py:Playout)
        playout = Playout() if self.hold_when_ahead else None
        loop_time = asyncio.get_running_loop().time
        limit = pcm16_bytes(self.coalesce_audio_s, rate)
        hold_limit = max(limit, pcm16_bytes(self.hold_frame_s, rate))
        # a burst (chunks queued behind the one read: the turn's audio is ahead of the reader): what is queued
        # goes out in frames of up to hold_frame_s, as after a hold (fewer frames, fewer pipeline steps)
        join_queued = joiner(state.turn, rate=rate, coalesce_s=max(self.coalesce_audio_s, self.hold_frame_s))

        def take_held(max_bytes: int) -> bytes:
            return b"" if state.cancelled else take_ready(max_bytes)

        hold = (
            state.hold
        )  # ends at once when the turn's end is known (no more chunks to wait for), or barge-in
        state.turn.add_done_callback(lambda _turn: hold.release())
        async for pcm in state.turn:
            if state.cancelled:
                return
            if not pcm:
                continue
            n = len(pcm)
            pcm = join(pcm)
            await out(pcm)
            if playout is None:
                continue
            if n != len(pcm):  # chunks were queued: a burst, or a busy loop; joining saves the frames
                playout = None  # (no holds in this turn: their wake-ups would land amid the burst)
                join = join_queued  # (what queues from now on goes out in frames of up to hold_frame_s)
                continue
            playout.push(len(pcm) / bytes_per_s, loop_time())
            # hold only after a chunk that came alone, and one small enough for a frame to gather more
            # (the cheap check first: at real time no hold is ever due, and no coroutine is made per chunk)
            if (
                2 * n <= limit
                and playout.hold(loop_time())
                and not await hold_while_ahead(
                    playout, loop_time, hold, take_held, out, hold_limit, bytes_per_s
                )
            ):
                playout = None  # no more holds in this turn (never pace audio already received)

    async def _push_audio(self, state: _TurnState, rate: int, pcm: bytes) -> None:
        """One frame of the turn's audio into its audio context, then the words it makes due."""
        context_id, clock = state.context_id, state.clock
        state.touch()
        if state.record is not None:
            state.record.on_audio()
        phone = self._playback()
        start_s = clock.audio_seconds
        if phone is None:
            await self.append_to_audio_context(
                context_id, TTSAudioRawFrame(pcm, rate, 1, context_id=context_id)
            )
        now = time.monotonic()
        if state.first_audio_at is None:
            state.first_audio_at = now
        due = now - state.first_audio_at + self.word_due_margin_s
        words = clock.add_audio(len(pcm) / (2.0 * rate), due_s=due)
        words += clock.complete_rendered(state.turn.rendered)  # (Kitta: a segment's audio ended)
        if phone is not None:  # on a carrier call: cut at the word starts, a mark at each
            await phone.append_audio(state, rate, pcm, start_s, words)
        if words:
            await self._push_words(clock, words, context_id)

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
            state.first_audio_at = None
            if self._phone is not None:
                self._phone.restart(context_id)
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
        if self._phone is not None:  # first: what the caller heard, before the interrupted contexts go
            await self._phone.on_interruption()
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
        state.hold.release()  # a reader holding while ahead returns now
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

    # -- phone calls (carrier playback acknowledgements: ttsbridge.pipecat.telephony) ---------------------

    def _playback(self) -> ServicePlayback | None:
        """The call's playback side, if this service's pipeline serializes through a ``PlaybackAcks``."""
        try:
            worker = self.pipeline_worker
        except Exception:  # not set up by a pipeline worker (a bare test harness)
            return None
        if worker is not self._phone_worker:  # looked up once per pipeline this service runs in
            self._phone_worker = worker
            # A call needs a PlaybackAcks serializer, which imported the telephony module: without it
            # there is no call, and the module is never imported (a service off the phone does not load it).
            telephony = sys.modules.get("ttsbridge.pipecat.telephony")
            if telephony is None:
                self._phone = None
                return None
            ServicePlayback, call_of = telephony.ServicePlayback, telephony.call_of
            call = call_of(worker)
            self._phone = ServicePlayback(self, call, super().push_frame) if call is not None else None
        return self._phone

    async def push_frame(self, frame: Frame, direction: FrameDirection = FrameDirection.DOWNSTREAM) -> None:
        phone = self._phone
        if phone is not None and await phone.intercept(frame, direction):
            return  # held until the carrier has played it, or pushed after the drain
        await super().push_frame(frame, direction)

    async def _append_stop_frame(self, context_id: str) -> None:
        phone = self._phone
        if phone is not None:
            phone.keep_span(context_id)  # ends when the carrier has played the reply
        await super()._append_stop_frame(context_id)
        if phone is not None:
            await phone.end_reply(context_id)  # the final mark, behind the stop frame

    def _awaits_carrier(self, context_id: str) -> bool:
        return self._phone is not None and self._phone.awaits_carrier(context_id)

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
                state.hold.release()
                self._spawn(self._cancel_and_reap(state))
        await self._fail_context(context_id, exc)
