"""Phone bots that know what the caller heard: carrier playback marks for Pipecat (docs/telephony.md).

The one thing a phone bot adds is its serializer, wrapped::

    serializer = PlaybackAcks(TwilioFrameSerializer(stream_sid, call_sid, ...))

:class:`PlaybackAcks` is a Pipecat ``FrameSerializer`` around the carrier's own Pipecat serializer (Twilio,
Telnyx, Exotel: ``mark``; Plivo: ``checkpoint`` / ``playedStream``): everything goes through the wrapped one,
and it adds what that one lacks. It sends the marks our TTS service places in its audio, reads the carrier's
echoes, notes every ``clear`` (a mark pending then never counts as played), and holds the hang-up (the
``EndFrame`` it serializes, which is also when Pipecat's serializers hang up on their own) until the last
reply's final mark is back, bounded by the audio still unplayed plus a margin.

Our TTS services (:class:`~ttsbridge.pipecat.TurnTTSService`) find the call's :class:`CallPlayback` through
the pipeline they run in (the ``PipelineWorker`` both are set up by) and, on such a call:

* place a mark at every word start of their audio the word clock knows when the audio is pushed (at least
  every :data:`~ttsbridge.policy.playback.DEFAULT_MAX_SPACING_S`), and one after each reply's last sample
  (behind its ``TTSStoppedFrame``, which flushes the output transport's last partial chunk);
* let their timed frames (the word ``TTSTextFrame``\\ s Pipecat's output transport releases at their PTS, and
  the frames stamped to follow them) go downstream only once the carrier has played up to their PTS: after a
  barge-in the assistant aggregator, so the LLM context, holds the words the caller heard. Before the first
  echo, and on a carrier that never echoes, Pipecat's own estimate stands (the frames' PTS);
* count the usage ledger's ``characters_heard`` and write ``ttsbridge.heard_*`` on the turn's span from the
  same position;
* hold an ``EndWorkerFrame`` going downstream (and the ``EndFrame``) until the call has drained (see
  :meth:`CallPlayback.drain`); a barge-in or the caller's hang-up ends the wait at once.

Pure bookkeeping (marks, echoes, clears, limits, the drain's bound) is
:class:`~ttsbridge.policy.playback.PlaybackBook`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from loguru import logger
from pipecat.frames.frames import (
    AggregatedTextFrame,
    AudioRawFrame,
    CancelFrame,
    EndFrame,
    EndWorkerFrame,
    Frame,
    InterruptionFrame,
    OutputAudioRawFrame,
    OutputTransportMessageFrame,
    SystemFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.frame_processor import FrameDirection, FrameProcessorSetup
from pipecat.serializers.base_serializer import FrameSerializer

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.policy.playback import (
    DEFAULT_MARGIN_S,
    DEFAULT_MAX_PENDING,
    DEFAULT_MAX_SPACING_S,
    DEFAULT_MIN_GAP_S,
    PlaybackBook,
    PlaybackMark,
    ReplyPlayback,
)
from ttsbridge.policy.words import TimedWord

if TYPE_CHECKING:
    from pipecat.clocks.base_clock import BaseClock

    from ttsbridge.turns import Turn


class SpokenTurn(Protocol):
    """What :class:`ServicePlayback` reads of one of the service's open turns (its reader's state)."""

    context_id: str
    turn: Turn


class SpeakingService(Protocol):
    """What :class:`ServicePlayback` uses of the TTS service it is composed into (a ``TurnTTSService``): this
    module names no class of the service's, so the service imports it and not the other way round."""

    async def append_to_audio_context(self, context_id: str, frame: Frame) -> None: ...
    def get_clock(self) -> BaseClock: ...
    def _spawn(self, coro: Any) -> asyncio.Task[Any]: ...
    def _usage_by_carrier(self, context_id: str) -> None: ...
    async def _playback_over(
        self, context_id: str, *, completed: bool, heard_s: float | None = None
    ) -> None: ...
    def _stamp_segment_announcement(self, frame: Any) -> None: ...
    def _apply_context_interruptible(self, frame: Frame) -> None: ...


__all__ = [
    "CallPlayback",
    "DrainOutcome",
    "PlaybackAcks",
    "PlaybackMarkFrame",
    "ReplyHeard",
]

_EPS = 1e-6
#: PTS (ns) a frame may lie past an echoed position and still count as played: the float sums of a position
#: and the shift the wire gave it
_TOL_NS = 1_000_000


# ----------------------------------------------------------------------------------------------------
# frames and carriers


@dataclass
class PlaybackMarkFrame(OutputTransportMessageFrame):
    """A mark in the audio stream, placed by our TTS service: the output transport sends it after the audio
    before it (through the serializer, as a transport message), and :class:`PlaybackAcks` turns it into the
    carrier's ``mark`` / ``checkpoint``."""

    mark: PlaybackMark | None = None


class _Dialect:
    """One carrier's media-stream messages for marks (the wrapped serializer does the rest)."""

    carrier: ClassVar[str] = ""
    #: the wrapped serializer's attribute holding the stream id, and the one holding the leg's rate
    stream_attr: ClassVar[str] = "_stream_sid"
    rate_attr: ClassVar[str] = "_twilio_sample_rate"
    #: bytes per sample of the leg's audio (G.711: 1, 16-bit PCM: 2)
    sample_bytes: ClassVar[int] = 1
    #: the words that can appear in an inbound message this dialect reads (cheap test before parsing JSON)
    needles: ClassVar[tuple[str, ...]] = ("mark", "stop")

    def mark(self, inner: FrameSerializer, name: str) -> str:
        raise NotImplementedError

    def parse(self, message: dict[str, Any]) -> tuple[str, str | None] | None:
        """``("echo", name)``, ``("stop", None)`` or None (not ours)."""
        event = message.get("event")
        if event == "mark":
            name = (message.get("mark") or {}).get("name")
            return ("echo", str(name)) if name is not None else None
        if event == "stop":
            return ("stop", None)
        return None

    def stream_id(self, inner: FrameSerializer) -> str:
        return str(getattr(inner, self.stream_attr, "") or "")

    def payload_seconds(self, inner: FrameSerializer, payload: str | bytes) -> float:
        """Seconds of audio in one media message the wrapped serializer made (0 if unreadable)."""
        try:
            b64 = json.loads(payload)["media"]["payload"]
            rate = int(getattr(inner, self.rate_attr, 8000) or 8000)
        except (ValueError, TypeError, KeyError):
            return 0.0
        n = len(b64) * 3 // 4 - b64[-2:].count("=")
        return n / (self.sample_bytes * rate)


class _Twilio(_Dialect):
    carrier = "twilio"

    def mark(self, inner: FrameSerializer, name: str) -> str:
        return json.dumps({"event": "mark", "streamSid": self.stream_id(inner), "mark": {"name": name}})


class _Telnyx(_Dialect):
    carrier = "telnyx"
    stream_attr = "_stream_id"
    rate_attr = "_telnyx_sample_rate"

    def mark(self, inner: FrameSerializer, name: str) -> str:
        return json.dumps({"event": "mark", "mark": {"name": name}})


class _Exotel(_Dialect):
    carrier = "exotel"
    rate_attr = "_exotel_sample_rate"
    sample_bytes = 2

    def mark(self, inner: FrameSerializer, name: str) -> str:
        return json.dumps({"event": "mark", "stream_sid": self.stream_id(inner), "mark": {"name": name}})


class _Plivo(_Dialect):
    carrier = "plivo"
    stream_attr = "_stream_id"
    rate_attr = "_plivo_sample_rate"
    needles = ("played", "stop")

    def mark(self, inner: FrameSerializer, name: str) -> str:
        return json.dumps({"event": "checkpoint", "streamId": self.stream_id(inner), "name": name})

    def parse(self, message: dict[str, Any]) -> tuple[str, str | None] | None:
        event = message.get("event")
        # `playedStream` (Plivo's stream reference); its support article calls the same answer `played`.
        if event in ("playedStream", "played"):
            name = message.get("name")
            return ("echo", str(name)) if name is not None else None
        if event == "stop":
            return ("stop", None)
        return None  # `clearedAudio` confirms a clear: its checkpoints were already counted as cleared


def _dialect_for(serializer: FrameSerializer) -> _Dialect:
    from pipecat.serializers.exotel import ExotelFrameSerializer
    from pipecat.serializers.plivo import PlivoFrameSerializer
    from pipecat.serializers.telnyx import TelnyxFrameSerializer
    from pipecat.serializers.twilio import TwilioFrameSerializer

    for kind, dialect in (
        (TwilioFrameSerializer, _Twilio),
        (TelnyxFrameSerializer, _Telnyx),
        (ExotelFrameSerializer, _Exotel),
        (PlivoFrameSerializer, _Plivo),
    ):
        if isinstance(serializer, kind):
            return dialect()
    raise TTSInvalidOptionError(
        "serializer",
        type(serializer).__name__,
        "a Pipecat TwilioFrameSerializer, TelnyxFrameSerializer, ExotelFrameSerializer or PlivoFrameSerializer",
    )


# ----------------------------------------------------------------------------------------------------
# the call


@dataclass(frozen=True)
class DrainOutcome:
    """How one wait before a hang-up ended.

    ``reason``: ``"played"`` (every mark came back), ``"cleared"`` (a ``clear`` resolved them),
    ``"barge-in"``, ``"hung-up"`` (the stream stopped), ``"bound"`` (the audio still unplayed plus the margin
    passed), ``"idle"`` (no mark was out). ``bound_s``: the bound it had, from its start (None: none)."""

    reason: Literal["played", "cleared", "barge-in", "hung-up", "bound", "idle"]
    started_at: float
    ended_at: float
    bound_s: float | None

    @property
    def waited_s(self) -> float:
        return self.ended_at - self.started_at


@dataclass(frozen=True)
class ReplyHeard:
    """What the caller heard of one reply, once its playback is over.

    ``text``: the words that went to the LLM context (the word frames released), ``estimate``: the words
    Pipecat's push-time estimate would have put there at the same moment (their PTS had passed);
    ``heard_s``: the position used (s of the reply's audio; None: the estimate was used); ``source``:
    ``"carrier"`` or ``"estimate"``; ``outcome``: ``"played"``, ``"interrupted"``, ``"hung-up"``, ``"ended"``
    (an ``EndFrame`` before the carrier said so), ``"cancelled"`` (a ``CancelFrame``)."""

    context_id: str
    text: str
    estimate: str
    heard_s: float | None
    source: Literal["carrier", "estimate"]
    outcome: str


class CallPlayback:
    """One call's playback, shared by its :class:`PlaybackAcks` (the wire) and our TTS service (the marks and
    what was heard). The state is its :class:`~ttsbridge.policy.playback.PlaybackBook`; this adds the clock,
    the wake-ups, the drain and a record of each reply's heard text (:attr:`heard`)."""

    def __init__(
        self,
        book: PlaybackBook,
        carrier: str,
        *,
        max_mark_spacing_s: float = DEFAULT_MAX_SPACING_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.book = book
        self.carrier = carrier
        #: a mark at least this often (s of a reply's audio) where no word starts
        self.max_mark_spacing_s = max_mark_spacing_s
        #: how far a mark overtakes the audio before it on its way to the wire (the wrapped serializer's
        #: resampler, the output transport's partial chunk): the most seen on this call
        self.lead_s = 0.0
        self._clock = clock
        self._listeners: list[Callable[[], None]] = []
        self._waiters: set[asyncio.Future[None]] = set()
        self._interruptions = 0
        self._clears = 0
        #: each drain, in order (tests and logs; the last 64)
        self.drains: deque[DrainOutcome] = deque(maxlen=64)
        #: each reply's heard text, in the order their playback ended (the last 256)
        self.heard: deque[ReplyHeard] = deque(maxlen=256)
        #: echoes of marks a clear had already resolved (never counted as played)
        self.cleared_echoes = 0

    def now(self) -> float:
        return self._clock()

    # -- wake-ups

    def subscribe(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def _changed(self) -> None:
        for fut in list(self._waiters):
            if not fut.done():
                fut.set_result(None)
        for listener in list(self._listeners):
            listener()

    async def _wait(self, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.add(fut)
        timer = loop.call_later(max(0.0, timeout), lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            timer.cancel()
            self._waiters.discard(fut)

    # -- the wire (PlaybackAcks)

    def audio_sent(self, seconds: float) -> None:
        self.book.audio_sent(seconds, self.now())

    def mark_sent(self, mark: PlaybackMark, behind_s: float = 0.0) -> None:
        """``mark`` went on the wire; ``behind_s``: audio before it in the TTS's stream still held back on its
        way (the wrapped serializer's resampler, the output transport's partial chunk): it certifies that
        much less."""
        self.book.sent(mark, self.now(), behind_s=behind_s)
        self._changed()

    def clear_sent(self) -> None:
        self._clears += 1
        self.book.cleared()
        self._changed()

    def echo(self, name: str) -> None:
        mark = self.book.echoed(name)
        if mark is not None and mark.state == "cleared":
            self.cleared_echoes += 1
        if mark is not None:
            self._changed()

    def stopped(self) -> None:
        self.book.hung_up()
        self._changed()

    # -- the TTS

    def interrupted(self) -> None:
        """A barge-in reached the TTS (before its ``clear`` reaches the wire): drains end now."""
        self._interruptions += 1
        self._changed()

    def changed(self) -> None:
        """Something the listeners watch changed (the TTS placed a mark)."""
        self._changed()

    async def drain(self) -> DrainOutcome:
        """Wait until every mark out has come back (the last reply's final mark among them), bounded by the
        audio still unplayed plus :attr:`PlaybackBook.margin_s`; a barge-in, a ``clear`` or the end of the
        stream ends the wait at once. On a call where no mark was ever placed (another TTS service), the
        bound is all there is to wait for."""
        book = self.book
        since = self.now()
        interruptions, clears, lost = self._interruptions, self._clears, book.lost
        bound: float | None = None
        waited = False
        ran_out = False  # the wait ran into its bound (marks lost, or no mark to wait for)
        while True:
            now = self.now()
            book.expire(now)
            deadline = book.drain_deadline(since)
            if deadline is None and not book.emitted and book.play_end > since:
                deadline = book.play_end + book.margin_s  # no mark: the audio sent plus the margin
                ran_out = now >= deadline
            if deadline is not None:
                bound = deadline - since
            reason: str | None = None
            if self._interruptions != interruptions:
                reason = "barge-in"
            elif book.ended:
                reason = "hung-up"
            elif self._clears != clears:
                reason = "cleared"
            elif deadline is not None and now >= deadline:
                reason = "bound"
            elif deadline is None:
                # nothing out: every mark came back, or the last ones were lost as the wait ran out
                reason = "idle" if not waited else ("bound" if ran_out or book.lost > lost else "played")
            if reason is not None:
                outcome = DrainOutcome(reason, since, now, bound)  # type: ignore[arg-type]
                self.drains.append(outcome)
                logger.debug(f"playback drain ({self.carrier}): {reason} after {outcome.waited_s:.3f} s")
                return outcome
            assert deadline is not None
            waited = True
            await self._wait(deadline - now)


#: PipelineWorker -> its call (our TTS service finds the serializer's call through the pipeline it runs in)
_CALLS: weakref.WeakKeyDictionary[Any, CallPlayback] = weakref.WeakKeyDictionary()


def call_of(worker: Any) -> CallPlayback | None:
    """The :class:`CallPlayback` of the pipeline ``worker`` runs, if its serializer is a :class:`PlaybackAcks`."""
    try:
        return _CALLS.get(worker)
    except TypeError:  # not weak-referenceable: no call
        return None


# ----------------------------------------------------------------------------------------------------
# the serializer


class PlaybackAcks(FrameSerializer):
    """The carrier's Pipecat serializer, with playback acknowledgements (see the module docstring).

    Args:
        serializer: a Pipecat ``TwilioFrameSerializer``, ``TelnyxFrameSerializer``, ``ExotelFrameSerializer``
            or ``PlivoFrameSerializer`` (or a subclass), configured as usual (its ``auto_hang_up`` hangs up
            after the drain).
        margin_s: how much later than real time the carrier may play the audio it got (its jitter buffer, the
            network both ways): the drain waits at most the audio still unplayed plus this, and a mark not
            back this long after its audio could have played counts as lost.
        max_pending_marks: marks out at once (none of the carriers documents a limit; one slot is kept for
            each reply's final mark).
        min_mark_gap_s: no two marks of a reply closer than this (s of audio).
        max_mark_spacing_s: a mark at least this often (s of audio) where no word starts.
    """

    def __init__(
        self,
        serializer: FrameSerializer,
        *,
        margin_s: float = DEFAULT_MARGIN_S,
        max_pending_marks: int = DEFAULT_MAX_PENDING,
        min_mark_gap_s: float = DEFAULT_MIN_GAP_S,
        max_mark_spacing_s: float = DEFAULT_MAX_SPACING_S,
    ) -> None:
        if not isinstance(serializer, FrameSerializer):
            raise TTSInvalidOptionError("serializer", type(serializer).__name__, "a Pipecat FrameSerializer")
        for name, value, low in (
            ("margin_s", margin_s, 0.0),
            ("min_mark_gap_s", min_mark_gap_s, 0.0),
            ("max_mark_spacing_s", max_mark_spacing_s, 0.05),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low:
                raise TTSInvalidOptionError(name, value, f"a number >= {low}")
        if (
            isinstance(max_pending_marks, bool)
            or not isinstance(max_pending_marks, int)
            or max_pending_marks < 2
        ):
            raise TTSInvalidOptionError("max_pending_marks", max_pending_marks, "an integer >= 2")
        super().__init__(serializer._params)
        self._inner = serializer
        self._dialect = _dialect_for(serializer)
        # audio given to the wrapped serializer / put on the wire (s), and the last frame's length: what a
        # mark overtakes (the resampler's hold-back; at most one partial chunk in the output transport)
        self._in_s = 0.0
        self._out_s = 0.0
        self._frame_s = 0.0
        book = PlaybackBook(
            max_pending=max_pending_marks, min_gap_s=float(min_mark_gap_s), margin_s=float(margin_s)
        )
        self.call = CallPlayback(book, self._dialect.carrier, max_mark_spacing_s=float(max_mark_spacing_s))
        self._book = book

    @property
    def serializer(self) -> FrameSerializer:
        """The wrapped Pipecat serializer."""
        return self._inner

    @property
    def carrier(self) -> str:
        return self._dialect.carrier

    async def setup(self, setup: FrameProcessorSetup) -> None:
        await self._inner.setup(setup)
        worker = getattr(setup, "pipeline_worker", None)
        if worker is not None:
            with contextlib.suppress(TypeError):
                _CALLS[worker] = self.call

    async def serialize(self, frame: Frame) -> str | bytes | None:
        if isinstance(frame, PlaybackMarkFrame):
            mark = frame.mark
            if mark is None or self._book.find(mark.name) is not mark or self._book.ended:
                return None
            behind = max(0.0, self._in_s - self._out_s) + (0.0 if mark.final else self._frame_s)
            self.call.lead_s = max(self.call.lead_s, behind)
            self.call.mark_sent(mark, behind)
            return self._dialect.mark(self._inner, mark.name)
        if isinstance(frame, EndFrame):
            # The hang-up (the inner serializer's, and the transport's close after this returns) waits until
            # the audio sent has played: the final mark back, or the bound.
            await self.call.drain()
        payload = await self._inner.serialize(frame)
        if isinstance(frame, AudioRawFrame) and frame.sample_rate > 0:
            self._frame_s = len(frame.audio) / (2.0 * frame.sample_rate * max(1, frame.num_channels))
            self._in_s += self._frame_s
            if payload:
                out = self._dialect.payload_seconds(self._inner, payload)
                self._out_s += out
                self.call.audio_sent(out)
        elif isinstance(frame, InterruptionFrame) and payload:
            self._in_s = self._out_s  # the transport dropped what it held; start counting afresh
            self.call.clear_sent()
        return payload

    async def deserialize(self, data: str | bytes) -> Frame | None:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        if any(needle in text for needle in self._dialect.needles):
            try:
                message = json.loads(text)
            except (ValueError, TypeError):
                message = None
            event = self._dialect.parse(message) if isinstance(message, dict) else None
            if event is not None:
                kind, name = event
                if kind == "echo" and name is not None:
                    self.call.echo(name)
                    return None
                if kind == "stop":
                    self.call.stopped()
        return await self._inner.deserialize(data)


# ----------------------------------------------------------------------------------------------------
# the TTS service's side


@dataclass(eq=False)
class _Reply:
    context_id: str
    playback: ReplyPlayback
    #: the provider turn (its usage ledger counts the characters heard)
    turn: Any = None
    #: audio pushed (s, from the reply's start: its word clock's time base)
    audio_s: float = 0.0
    #: the tts span, kept open past the stop frame until the carrier played the reply
    span: Any = None
    #: where marks are still due (s of its audio, not pushed yet): word starts plus the wire's lead
    due: list[float] = field(default_factory=list)
    #: (pts, text, own spacing) of its word frames, in push order
    words: list[tuple[int, str, bool]] = field(default_factory=list)
    resolved: bool = False
    #: its final mark is placed (its audio context has ended)
    ended: bool = False


class ServicePlayback:
    """What a :class:`~ttsbridge.pipecat.TurnTTSService` does on a carrier call (composed into it; see the
    module docstring). ``push`` pushes a frame past the gate (the service's Pipecat ``push_frame``)."""

    def __init__(
        self,
        service: SpeakingService,
        call: CallPlayback,
        push: Callable[[Frame, FrameDirection], Awaitable[None]],
    ) -> None:
        self._service = service
        self.call = call
        self._push = push
        self._book = call.book
        self._replies: dict[str, _Reply] = {}
        self._held: list[tuple[Frame, FrameDirection]] = []
        self._pushed_s = 0.0
        self._spacing = call.max_mark_spacing_s
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._acked_seen = -1
        self._lag_ns = 0
        call.subscribe(self._on_change)

    # -- marks

    def _reply(self, state: SpokenTurn) -> _Reply:
        reply = self._replies.get(state.context_id)
        if reply is None or reply.ended:
            contexts = getattr(self._service, "_tts_contexts", {})
            ctx = contexts.get(state.context_id)
            playback = ReplyPlayback(state.context_id, interruptible=getattr(ctx, "interruptible", True))
            reply = _Reply(state.context_id, playback, turn=state.turn)
            self._replies[state.context_id] = reply
            self._service._usage_by_carrier(state.context_id)
        return reply

    def restart(self, context_id: str) -> None:
        """Pipecat let the reply's audio context go while its turn is open: the next audio starts a new one."""
        reply = self._replies.get(context_id)
        if reply is not None:
            reply.ended = True

    async def append_audio(
        self, state: SpokenTurn, rate: int, pcm: bytes, start_s: float, words: Sequence[TimedWord]
    ) -> None:
        """Append ``pcm`` (starting ``start_s`` into the reply) to the reply's audio context with a mark at each
        word start the word clock knows (and one at least every ``max_mark_spacing_s``), cutting the audio
        there. A mark goes :attr:`CallPlayback.lead_s` after the start it stands for: the audio the wire
        still holds back when it is sent, so that its echo certifies the word's start."""
        service = self._service
        context_id = state.context_id
        reply = self._reply(state)
        seconds = len(pcm) / (2.0 * rate)
        end_s = start_s + seconds
        lead = self.call.lead_s
        reply.due.extend(w.start + lead for w in words)
        reply.due.sort()
        cuts = [t for t in reply.due if t < end_s - _EPS]
        reply.due = [t for t in reply.due if t >= end_s - _EPS]
        last = reply.playback.last_mark_s
        if end_s - (last if last is not None else 0.0) >= self._spacing and (
            not cuts or cuts[-1] < end_s - self._spacing
        ):
            cuts.append(end_s)
        done = 0
        for at in cuts:
            at = max(at, start_s)  # a word timed late (held for its piece's end): a mark now
            mark = self._book.mark(reply.playback, at, pushed_s=self._pushed_s + (at - start_s))
            if mark is None:
                continue
            cut = min(len(pcm), max(done, round((at - start_s) * rate) * 2))
            if cut > done:
                await service.append_to_audio_context(
                    context_id, TTSAudioRawFrame(pcm[done:cut], rate, 1, context_id=context_id)
                )
                done = cut
            await service.append_to_audio_context(context_id, PlaybackMarkFrame(message={}, mark=mark))
        if done < len(pcm):
            await service.append_to_audio_context(
                context_id, TTSAudioRawFrame(pcm[done:], rate, 1, context_id=context_id)
            )
        self._pushed_s += seconds
        reply.audio_s = max(reply.audio_s, end_s)

    async def end_reply(self, context_id: str) -> None:
        """The reply's ``TTSStoppedFrame`` was appended: its final mark goes right behind it."""
        reply = self._replies.get(context_id)
        if reply is None or reply.ended:
            return
        reply.ended = True
        mark = self._book.mark(reply.playback, reply.audio_s, final=True, pushed_s=self._pushed_s)
        if mark is None:  # no room: the estimate stands for this reply
            await self._resolve(reply, "played", heard_s=None)
            return
        await self._service.append_to_audio_context(context_id, PlaybackMarkFrame(message={}, mark=mark))
        self._ensure_task()  # it ends the reply's playback when the carrier says so (or the mark is lost)

    def keep_span(self, context_id: str) -> None:
        """Keep the reply's span open past its stop frame (Pipecat ends it there): it ends when the carrier
        has played the reply, with what was heard on it."""
        reply = self._replies.get(context_id)
        spans = getattr(self._service, "_tts_spans", None)
        if reply is not None and isinstance(spans, dict):
            entry = spans.pop(context_id, None)
            if isinstance(entry, dict):
                reply.span = entry.get("span")

    def awaits_carrier(self, context_id: str) -> bool:
        """The reply's playback is reported by the carrier (its usage waits for it)."""
        reply = self._replies.get(context_id)
        return reply is not None and not reply.resolved

    # -- the gate

    def stamp(self, frame: PlaybackMarkFrame) -> None:
        """The mark leaves the TTS: give it the PTS its position has (Pipecat's word time base)."""
        tracker = getattr(self._service, "_word_timestamp_tracker", None)
        mark = frame.mark
        if mark is not None and tracker is not None and tracker.started:
            mark.pts = tracker.pts(mark.position_s)

    @staticmethod
    def _timed(frame: Frame, direction: FrameDirection) -> bool:
        """A frame the output transport would release at its PTS (its clock queue)."""
        return (
            direction == FrameDirection.DOWNSTREAM
            and bool(frame.pts)
            and not isinstance(frame, (SystemFrame, OutputAudioRawFrame, TTSStoppedFrame))
        )

    def _now_pts(self) -> int:
        return int(self._service.get_clock().get_time())

    def _margin_ns(self) -> int:
        return int(self._book.margin_s * 1e9)

    def _passthrough(self) -> bool:
        return self._book.silent or self._closed

    async def intercept(self, frame: Frame, direction: FrameDirection) -> bool:
        """The service is about to push ``frame``: True if this took it (held, or pushed later)."""
        if isinstance(frame, PlaybackMarkFrame):
            self.stamp(frame)
            return False
        if isinstance(frame, EndWorkerFrame) and direction == FrameDirection.DOWNSTREAM:
            self._service._spawn(self._end_after_drain(frame, direction))
            return True
        if isinstance(frame, EndFrame):
            await self.before_end()
            return False
        if isinstance(frame, CancelFrame):  # now: no drain; what was heard so far is what the carrier said
            self._held.clear()
            await self._end_all("cancelled", acks=True)
            self.close()
            return False
        service = self._service
        if isinstance(frame, AggregatedTextFrame):
            service._stamp_segment_announcement(frame)  # the PTS Pipecat gives it when it is pushed
        if not self._timed(frame, direction):
            return False
        service._apply_context_interruptible(frame)
        if isinstance(frame, TTSTextFrame) and frame.context_id in self._replies:
            self._replies[frame.context_id].words.append(
                (int(frame.pts or 0), frame.text, bool(frame.includes_inter_frame_spaces))
            )
        if self._passthrough() or int(frame.pts or 0) <= self._threshold():
            # played already (or a carrier that does not echo): on its way, behind what was held before it
            await self._release()
            return False
        self._held.append((frame, direction))
        self._ensure_task()
        return True

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = self._service._spawn(self._run())
        elif self._wake is not None:
            self._wake.set()

    def _on_change(self) -> None:
        acked = self._book.acked_pts
        if acked is not None and acked > self._acked_seen:
            # how far playback at the carrier runs behind the PTS it stands for (the largest seen)
            self._acked_seen = acked
            self._lag_ns = max(self._lag_ns, self._now_pts() - acked)
        if self._wake is not None:
            self._wake.set()

    async def _run(self) -> None:
        """Release held frames as the carrier plays them; end replies whose playback is over."""
        assert self._wake is not None
        while not self._closed:
            self._book.expire(self.call.now())
            await self._release()
            await self._settle_replies()
            delay = self._next_wake()
            if delay is None and not self._held and not self._open_replies():
                return
            self._wake.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay if delay is not None else None)

    def _open_replies(self) -> bool:
        return any(not r.resolved for r in self._replies.values())

    def _next_wake(self) -> float | None:
        times: list[float] = []
        if self._held:
            now = self._now_pts()
            first = min(int(f.pts or 0) for f, _ in self._held)
            times.append((first + self._margin_ns() + self._lag_ns - now) / 1e9)
        expiry = self._book.next_expiry()
        if expiry is not None:
            times.append(expiry - self.call.now())
        return max(0.0, min(times)) + 0.001 if times else None

    def _threshold(self) -> int:
        """Held frames with a PTS up to this go on: up to the last echo; up to a mark given up as lost (the
        estimate stands for its words); and, for a frame no mark covers, once it is older than the carrier's
        lag seen so far plus the margin."""
        book = self._book
        threshold = self._now_pts() - self._margin_ns() - self._lag_ns
        for pts in (book.acked_pts, book.lost_pts):
            if pts is not None:
                threshold = max(threshold, pts + _TOL_NS)
        return threshold

    async def _release(self, upto_pts: int | None = None) -> None:
        """Push the held frames that have played (see :meth:`_threshold`; ``upto_pts``: those up to it), all
        of them once the carrier is known not to echo (the output transport then times them itself), in PTS
        order: the order the output transport would have released them in."""
        if not self._held:
            return
        if self._passthrough():
            out, self._held = self._held, []
        else:
            threshold = self._threshold() if upto_pts is None else upto_pts
            out = [h for h in self._held if int(h[0].pts or 0) <= threshold]
            self._held = [h for h in self._held if int(h[0].pts or 0) > threshold]
        out.sort(key=lambda h: int(h[0].pts or 0))  # stable: frames of one PTS keep their order
        for frame, direction in out:
            await self._push(frame, direction)

    # -- barge-in, end of call

    async def on_interruption(self) -> None:
        """A barge-in reached the TTS: the LLM context gets the words heard (up to the last echo, or up to
        now by the estimate before the carrier has echoed anything), the rest of the held frames is dropped,
        and the interrupted replies' playback ends here."""
        self.call.interrupted()
        now = self._now_pts()
        by_carrier = self._book.acks_live and not self._book.silent
        acked = self._book.acked_pts
        upto = (acked + _TOL_NS if acked is not None else -1) if by_carrier else now
        if self._held:
            await self._release(upto)
            self._held = [h for h in self._held if not h[0].interruptible]  # the rest was not heard
        for reply in list(self._replies.values()):
            if not reply.resolved and reply.playback.interruptible:
                heard = reply.playback.heard_s if by_carrier else None
                await self._resolve(reply, "interrupted", heard_s=heard, upto_pts=upto, now_pts=now)

    async def _end_after_drain(self, frame: Frame, direction: FrameDirection) -> None:
        await self.call.drain()
        await self._release()
        await self._push(frame, direction)

    async def before_end(self) -> None:
        """The ``EndFrame`` is about to leave the TTS (all its audio is pushed): wait for the carrier to play
        it (bounded), then let every held frame go and end every reply's playback."""
        outcome = await self.call.drain()
        self._book.expire(self.call.now())
        await self._settle_replies()
        held, self._held = self._held, []
        for frame, direction in held:
            await self._push(frame, direction)
        await self._end_all(
            "hung-up" if outcome.reason == "hung-up" else "ended", acks=outcome.reason != "bound"
        )
        self.close()

    async def _end_all(self, outcome: str, *, acks: bool) -> None:
        """The call is over for this service: end every reply's playback with what is known (the last echo
        with ``acks``, else the estimate)."""
        for reply in list(self._replies.values()):
            if not reply.resolved:
                acked = acks and reply.playback.acked
                await self._resolve(reply, outcome, heard_s=reply.playback.heard_s if acked else None)

    def close(self) -> None:
        self._closed = True
        self.call.unsubscribe(self._on_change)
        if self._wake is not None:
            self._wake.set()

    # -- heard text, usage, span

    async def _settle_replies(self) -> None:
        for reply in list(self._replies.values()):
            if reply.resolved or not reply.ended:
                continue
            playback = reply.playback
            if playback.finished:
                await self._resolve(reply, "played", heard_s=playback.end_s)
            elif playback.cleared:
                await self._resolve(
                    reply, "interrupted", heard_s=playback.heard_s if playback.acked else None
                )
            elif self._book.ended:
                await self._resolve(reply, "hung-up", heard_s=playback.heard_s if playback.acked else None)
            elif playback.lost and not any(m.reply is playback for m in self._book.open_marks()):
                await self._resolve(reply, "played", heard_s=None)  # lost: the estimate stands

    async def _resolve(
        self,
        reply: _Reply,
        outcome: str,
        *,
        heard_s: float | None,
        upto_pts: int | None = None,
        now_pts: int | None = None,
    ) -> None:
        reply.resolved = True
        if self._replies.get(reply.context_id) is reply:
            del self._replies[reply.context_id]
        now = self._now_pts() if now_pts is None else now_pts
        if upto_pts is None:
            acked = self._book.acked_pts
            upto_pts = now if heard_s is None else (acked + _TOL_NS if acked is not None else -1)
            if outcome == "played":
                upto_pts = max(upto_pts, max((p for p, _, _ in reply.words), default=-1))
        record = ReplyHeard(
            reply.context_id,
            _join(w for w in reply.words if w[0] <= upto_pts),
            _join(w for w in reply.words if w[0] <= now),
            heard_s,
            "carrier" if heard_s is not None else "estimate",
            outcome,
        )
        self.call.heard.append(record)
        completed = outcome in ("played", "ended")
        service = self._service
        try:
            await service._playback_over(reply.context_id, completed=completed, heard_s=heard_s)
        except Exception as exc:  # reporting never breaks the pipeline
            logger.warning(f"{service} heard-text report of {reply.context_id} failed: {type(exc).__name__}")
        self._write_span(reply, record)

    def _write_span(self, reply: _Reply, record: ReplyHeard) -> None:
        span = reply.span
        if span is None:
            entry = getattr(self._service, "_tts_spans", {}).get(reply.context_id)
            span = entry.get("span") if isinstance(entry, dict) else None
            owned = False
        else:
            owned = True
        if span is None:
            return
        try:
            if span.is_recording():
                chars = getattr(reply.turn, "characters_heard", None)
                attrs: dict[str, Any] = {
                    "ttsbridge.heard_source": record.source,
                    "ttsbridge.playback": record.outcome,
                    "ttsbridge.carrier": self.call.carrier,
                }
                if record.heard_s is not None:
                    attrs["ttsbridge.heard_audio_s"] = round(record.heard_s, 4)
                if chars is not None:
                    attrs["ttsbridge.characters_heard"] = chars
                span.set_attributes(attrs)
            if owned:
                if record.outcome == "interrupted":
                    span.set_attribute("tts.interrupted", True)
                span.end()
        except Exception as exc:  # tracing never breaks the pipeline
            logger.debug(f"tts span of {reply.context_id}: {type(exc).__name__}")
        reply.span = None


def _join(words: Any) -> str:
    out = ""
    for _, text, spaced in words:
        out += text if (spaced or not out) else " " + text
    return out
