"""Sans-I/O Kitta Realtime TTS v2: one :class:`KittaProtocol` per WebSocket connection, carrying at most one
turn (one server session, one ``request_id``); the engine's :class:`~ttsbridge.engine.TurnProtocol` contract.

Everything that decides lives here (clock passed in): the phase table (:mod:`.states`), the limits and audio
order (:mod:`.segments`), server events (:mod:`.receiving`), the handshake (:mod:`.handshake`), held starts
and the "server owes us something" deadline (:meth:`~KittaProtocol.tick`), and retries (:mod:`.retry`): on a
retryable failure its :class:`~ttsbridge.engine.events.TurnFailed` carries the turn's next attempt (a new
connection, a derived request_id, the never-delivered segments replayed).
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnDone, TurnFailed
from ttsbridge.engine.protocol import RetryPlan, TurnProtocol
from ttsbridge.errors import TTSBridgeError, TTSTimeoutError
from ttsbridge.kitta.billing import turn_usage
from ttsbridge.kitta.catalog import KittaHandshake
from ttsbridge.kitta.facts import KittaRequest, Outcome, Replay, TurnFacts, plan_retry
from ttsbridge.kitta.models import AuthEvent, KittaLimits, StartEvent, StartRequest
from ttsbridge.kitta.receiving import ServerEvents
from ttsbridge.policy.usage import TurnUsage

if TYPE_CHECKING:
    from ttsbridge.turns import Turn
from ttsbridge.kitta.segments import AudioOrder, Segment, SegmentStatus, TextQueue
from ttsbridge.kitta.states import LIVE, TERMINAL, TRANSITIONS, State
from ttsbridge.kitta.wire import (
    RETRYABLE_CLOSE_CODES,
    KittaConnectionClosed,
    KittaLimitError,
    KittaProtocolError,
    decode,
    encode,
    error_from_event,
    split_text,
)

# fmt: off
__all__ = [
    "RETRYABLE_CLOSE_CODES", "KittaConnectionClosed", "KittaLimitError", "KittaProtocol", "KittaProtocolError",
    "KittaRequest", "Outcome", "Replay", "Segment", "SegmentStatus", "State", "TurnFacts", "decode", "encode", "error_from_event",
    "split_text",
]
# fmt: on

logger = logging.getLogger("ttsbridge.kitta")


@dataclass(eq=False)
class KittaProtocol(KittaHandshake, ServerEvents, TurnProtocol):
    """One Kitta v2 connection (at most one turn). See the module docstring."""

    request: StartRequest
    auth: str = "header"  # "header" (Authorization on the handshake) or "frame" (in-band auth event)
    token: str | None = field(default=None, repr=False)
    limits: KittaLimits = field(default_factory=KittaLimits)
    #: Masked in error texts built from server text (the key, whatever the auth mode).
    secrets: tuple[str, ...] = field(default=(), repr=False)
    url: str = ""
    #: Longest server silence while it owes us something (ready, audio, usage, finish).
    event_timeout: float = 20.0
    max_retries: int = 3
    backoff_initial: float = 0.25
    backoff_max: float = 4.0
    resume_after_audio: bool = True
    #: Names the connection in logs until a turn opens on it.
    label: str = "standby"
    rng: random.Random | None = field(default=None, repr=False, compare=False)

    state: State = field(default=State.CONNECTING, init=False)
    #: The connection's error (the turn's, or the standby's), once it failed.
    error: TTSBridgeError | None = field(default=None, init=False)
    turn_id: str | None = field(default=None, init=False)
    facts: TurnFacts | None = field(default=None, init=False, repr=False)
    #: The turn's next attempt, after a failure that is retried (what its ``TurnFailed`` carries).
    plan: RetryPlan | None = field(default=None, init=False, repr=False)
    #: Every ``send_text`` closes its segment (the request's ``flush_each_send``).
    flush_each_send: bool = field(default=False, init=False)
    #: ``(code, reason)`` the I/O layer closes the socket with, once the outcome is known.
    close_request: tuple[int, str] | None = field(default=None, init=False)
    sample_rate: int | None = field(default=None, init=False)
    #: Units the server reported in ``usage`` events.
    units_billed: int = field(default=0, init=False)
    #: Units on ``finish`` (None until finished).
    finish_units: int | None = field(default=None, init=False)

    _text: TextQueue = field(init=False, repr=False)
    _order: AudioOrder = field(default_factory=AudioOrder, init=False, repr=False)
    _auth_frame: bytes | None = field(default=None, init=False, repr=False)
    _events: list[Event] = field(default_factory=list, init=False, repr=False)
    _start_at: float | None = field(default=None, init=False, repr=False)  # start held until then
    _start_due: bool = field(default=False, init=False, repr=False)
    _last_event_at: float = field(default=0.0, init=False, repr=False)
    _last_sent: float = field(default=0.0, init=False, repr=False)
    _opened: bool = field(default=False, init=False, repr=False)  # the upgrade succeeded

    def __post_init__(self) -> None:
        if self.auth not in ("header", "frame"):
            raise ValueError(f"auth must be 'header' or 'frame', got {self.auth!r}")
        if self.auth == "frame":
            if not self.token:
                raise ValueError("auth='frame' needs a token")
            self._auth_frame = encode(AuthEvent(token=self.token))
        self._order.label = self.label
        self._text = TextQueue(self.limits, self.label)

    # --------------------------------------------------------------------------------------------- queries

    @property
    def request_id(self) -> str:
        return self.turn_id or self.label

    @property
    def deferred(self) -> bool:
        """No turn has opened on this connection yet (a warm standby): nothing was started."""
        return self.turn_id is None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    closed = terminal

    @property
    def accepts_turn(self) -> bool:
        """One turn per connection: none yet, and not over."""
        return self.turn_id is None and not self.terminal

    @property
    def is_ready(self) -> bool:
        return self.state in LIVE

    @property
    def segments(self) -> list[Segment]:
        return self._text.segments.items

    @property
    def units_sent(self) -> int:
        """Characters queued for sending in this session (our estimate of billable units: characters)."""
        return self._text.units_sent

    @property
    def stop_requested(self) -> bool:
        return self._text.stop_requested

    def has_data_to_send(self) -> bool:
        """Whether :meth:`data_to_send` may return frames (cheap check for the I/O loop)."""
        return not self.terminal and bool(self._auth_frame or self._start_due or self._text.frames)

    def _can_resume(self) -> bool:
        """True if no segment is part-way delivered (so the rest can be replayed on a new session)."""
        return self._text.segments.can_resume()

    def next_deadline(self) -> float | None:
        """When :meth:`tick` must be called next (a held start, or the server's silence bound)."""
        if self.terminal:
            return None
        deadlines = [self._start_at] if self._start_at is not None and not self._start_due else []
        if self._owes():
            deadlines.append(self._silent_since() + self.event_timeout)
        return min(deadlines, default=None)

    # ------------------------------------------------------------------------------------------- commands

    def open_turn(self, turn_id: str, request: KittaRequest | None, now: float) -> TurnFacts:
        """Open the connection's one turn: ``start`` with ``turn_id`` goes out once authenticated, and not
        before ``request.not_before``. ``request.start`` replaces the start request (a standby serves any
        options); a retry's ``request.facts`` and ``request.replay`` carry the turn over."""
        request = request or KittaRequest()
        if self.turn_id is not None:
            raise KittaProtocolError("kitta: this connection already carries a turn")
        if self.terminal:
            raise KittaProtocolError(f"kitta: cannot start: session is {self.state.value}")
        if not 1 <= len(turn_id) <= 128:
            raise ValueError("request_id must have 1-128 characters")
        self.turn_id = self._order.label = self._text.label = turn_id
        if request.start is not None:
            self.request = request.start
        self.flush_each_send = request.flush_each_send
        if request.event_timeout is not None:
            self.event_timeout = request.event_timeout
        self.facts = facts = request.facts or TurnFacts(base_id=turn_id, ids=[turn_id])
        if request.replay is not None:
            self._text.replay(request.replay.segments, request.replay.buffer, request.replay.stop)
        not_before = request.not_before
        self._start_at = now if not_before is None else max(now, not_before)
        self._last_event_at = now  # the server owes us 'ready' from now on
        self.tick(now)
        return facts

    def _check_open(self, turn_id: str, what: str) -> None:
        if turn_id != self.turn_id:
            raise KittaProtocolError(f"kitta: cannot {what}: no turn {turn_id!r} on this connection")
        if self.terminal:
            raise KittaProtocolError(f"kitta: cannot {what}: session is {self.state.value}")
        if self.stop_requested:
            raise KittaProtocolError(f"kitta: cannot {what} after stop")

    def send_text(self, turn_id: str, text: str, now: float) -> None:
        """Queue text. Split into text events of at most ``max_text_chars`` at sentence, then word
        boundaries; a flush is inserted early so that no segment exceeds ``max_segment_chars``.

        Raises :class:`KittaLimitError` (and queues nothing) if the session would exceed
        ``max_session_units``."""
        self._check_open(turn_id, "send text")
        self._last_sent = now
        if text:
            self._text.text(text)
            assert self.facts is not None
            self.facts.characters_sent += len(text)
        if self.flush_each_send:
            self._text.flush()

    def flush(self, turn_id: str, now: float) -> bool:
        """Close the current segment (a billed unit of generation). No-op (False) if nothing but
        whitespace is buffered: whitespace stays buffered and leads the next segment."""
        self._check_open(turn_id, "flush")
        self._last_sent = now
        return self._text.flush()

    def end_turn(self, turn_id: str, now: float) -> None:
        """No more text: the server flushes what is left (one last segment) and sends ``finish``."""
        if turn_id != self.turn_id or self.stop_requested or self.terminal:
            return
        self._last_sent = now
        self._text.stop()
        if self.facts is not None:
            self.facts.ended = True

    def cancel_turn(self, turn_id: str, now: float) -> None:
        """Close the session: nothing more is sent or delivered; unflushed text is never billed. A turn
        already over whose end the caller did not see yet counts as cancelled: a barge-in wins over an end
        nobody consumed (its error is not reported)."""
        facts = self.facts
        if turn_id != self.turn_id or facts is None:
            return
        if facts.outcome is not None and facts.outcome is not Outcome.CANCELLED:
            facts.outcome, facts.error = Outcome.CANCELLED, None
            return
        self._cancel(turn_id)

    def _cancel(self, turn_id: str) -> None:
        facts = self.facts
        if turn_id != self.turn_id or facts is None or facts.outcome is not None or self.terminal:
            return
        facts.outcome = Outcome.CANCELLED
        self._events = [e for e in self._events if not isinstance(e, AudioReceived)]
        self._events.append(TurnDone(turn_id, cancelled=True))
        self._close((1000, "cancelled"))

    def close_frame(self) -> tuple[int, str]:
        """1002 after a protocol error of the server's, 1000 with the reason otherwise."""
        return self.close_request or (1000, "")

    def handshake_accepted(self, subprotocol: str | None, now: float) -> TTSBridgeError | None:
        """The upgrade succeeded: the server must have chosen our subprotocol; from now on it owes us
        ``authenticated`` (a standby's silence is bounded too)."""
        error = self._subprotocol_error(subprotocol)
        if error is None:
            self._opened = True
            self._last_event_at = max(self._last_event_at, now)
        return error

    def close(self, error: TTSBridgeError | None, now: float) -> None:
        """The client closes the connection. With ``error`` (a connect that failed, a refused handshake, the
        provider shutting down) the turn fails with it, retried when the retry policy says so (never after a
        timeout: the turn's own time is spent, as for a server that went silent). Without, the session is
        closed: a turn on it ends cancelled (v2 has no cancel message: closing the session is one)."""
        if self.terminal:
            return
        if error is None:
            if self.turn_id is not None:
                self._cancel(self.turn_id)
            self._close((1000, "closed"))
            return
        self._fail(error, now, close=(1000, "closed"), may_retry=not isinstance(error, TTSTimeoutError))

    def _close(self, close: tuple[int, str]) -> None:
        if not self.terminal:
            self._step("close")
            self.close_request = close
        self._text.frames.clear()
        self._order.held.clear()
        self._start_at = None
        self._start_due = False

    # ------------------------------------------------------------------------------------------- outputs

    def data_to_send(self) -> list[bytes]:
        """Frames that may be written now, in order (phase rules applied)."""
        if self.terminal:
            self._text.frames.clear()
            return []
        out: list[bytes] = []
        if self._auth_frame is not None:
            self._step("send_auth")
            out.append(self._auth_frame)
            self._auth_frame = None
        if self._start_due and self.state is State.AUTHENTICATED:
            assert self.turn_id is not None
            self._step("send_start")
            self._start_due = False
            self._start_at = None
            out.append(encode(StartEvent(request_id=self.turn_id, request=self.request)))
        frames = self._text.frames
        while frames and self.is_ready:
            kind, data = frames.pop(0)
            self._step("send_stop" if kind == "stop" else "send_text")
            out.append(data)
        return out

    def events_received(self) -> list[Event]:
        events, self._events = self._events, []
        return events

    # -------------------------------------------------------------------------------------------- inputs

    def tick(self, now: float) -> None:
        """Release a held ``start`` whose time has come; fail the turn if the server is overdue."""
        if self.terminal:
            return
        if self._start_at is not None and not self._start_due and now >= self._start_at:
            self._start_due = True
            self._last_event_at = max(self._last_event_at, now)
        if self._owes() and now - self._silent_since() >= self.event_timeout:
            err = TTSTimeoutError(
                f"kitta {self.request_id}: no server event for {self.event_timeout:g} s "
                f"(state {self.state.value})"
            )
            self.timeouts += 1
            self._fail(err, now, close=(1000, "failed"), may_retry=False)

    def awaiting_since(self) -> float | None:
        """Since when the server has owed us something (``authenticated``, ``ready``, audio, ``usage``,
        ``finish``), or None; the engine's liveness check counts silence from it."""
        return self._silent_since() if self._owes() else None

    # ------------------------------------------------------------------------------------------ internals

    def _step(self, event: str) -> None:
        new = TRANSITIONS.get((self.state, event))
        if new is None:
            raise KittaProtocolError(f"kitta: {event!r} in state {self.state.value}")
        self.state = new

    def _secrets(self) -> tuple[str, ...]:
        return (*self.secrets, self.token) if self.token else self.secrets

    def _owes(self) -> bool:
        """Whether the server owes us something (so its silence is bounded by ``event_timeout``): a connection
        with no turn yet owes ``authenticated`` once the upgrade succeeded."""
        if self.terminal:
            return False
        if self.turn_id is None:
            return self._opened and self.state is State.CONNECTING
        if self._start_at is not None and not self._start_due:
            return False
        return not self.is_ready or self.stop_requested or not self._text.segments.all_done()

    def _silent_since(self) -> float:
        return max(self._last_sent, self._last_event_at)

    def _fail(
        self, err: TTSBridgeError, now: float, *, close: tuple[int, str] | None, may_retry: bool = True
    ) -> None:
        if self.error is None:
            self.error = err
        if not self.terminal:
            self._step("fail")
        self.close_request = close
        self._text.frames.clear()
        self._start_at = None
        self._start_due = False
        facts = self.facts
        if self.turn_id is not None and facts is not None and facts.outcome is None:
            self.plan = plan_retry(self, err, now) if may_retry else None
            if self.plan is None:
                facts.outcome, facts.error, facts.failed_at = Outcome.FAILED, err, now
            self._events.append(TurnFailed(self.turn_id, err, self.plan))
        self._events.append(ConnectionFailed(err))

    # --------------------------------------------------------------------------------------------- retries

    def _replay(self) -> Replay:
        """Everything of this session whose audio was never delivered (pending segments, the unflushed
        buffer, ``stop`` if it was requested), for the turn's next attempt. Only when :meth:`_can_resume`."""
        if not self._can_resume():
            raise KittaProtocolError("kitta: a segment was part-way delivered; it must not be replayed")
        return Replay(*self._text.unsent())

    # ---------------------------------------------------------------------------------------------- answers

    def usage(self, facts: TurnFacts, turn: Turn) -> TurnUsage:
        return turn_usage(self.segments, self.finish_units, self.sample_rate, facts, turn)

    @property  # type: ignore[override]
    def reports_send_ends(self) -> bool:
        return self.flush_each_send  # each send is flushed: a segment, ended by its `usage`

    def rendered(self, facts: TurnFacts) -> list[tuple[int, float]]:
        rate = self.sample_rate  # each segment's `usage`: the end of that text's audio
        return [(chars, n / 2 / rate) for chars, n in facts.rendered] if rate else []

    def wire_format(self) -> str:
        rate = self.sample_rate
        return f"{self.request.format}@{rate}" if rate else self.request.format
