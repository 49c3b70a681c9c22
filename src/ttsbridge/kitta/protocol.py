"""Sans-I/O Kitta Realtime TTS v2 session: one object per WebSocket connection (= one server session).

No sockets here. The caller feeds received binary frames to :meth:`KittaProtocol.receive`, queues commands
with :meth:`~KittaProtocol.send_text` / :meth:`~KittaProtocol.flush` / :meth:`~KittaProtocol.stop`, and writes
whatever :meth:`~KittaProtocol.data_to_send` hands out. The object enforces the phase order
(``connecting → authenticated → started → ready → streaming → stopping → finished | failed | closed``), the
client-side limits (text split at 2,000 characters, segment flushed early before 10,000, session capped at
100,000 units), reorders audio by sequence number and tracks each flushed segment (pending → delivering →
done) so that a retry replays only segments none of whose audio was delivered.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack
from pydantic import TypeAdapter, ValidationError

from ttsbridge._redact import redact
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError
from ttsbridge.kitta.models import (
    AudioEvent,
    AuthenticatedEvent,
    AuthEvent,
    ClientEvent,
    ErrorEvent,
    FinishEvent,
    FlushEvent,
    KittaLimits,
    ReadyEvent,
    ServerEvent,
    StartEvent,
    StartRequest,
    StopEvent,
    TextEvent,
    UsageEvent,
)

__all__ = [
    "RETRYABLE_CLOSE_CODES",
    "KittaConnectionClosed",
    "KittaLimitError",
    "KittaProtocol",
    "KittaProtocolError",
    "Segment",
    "SegmentStatus",
    "State",
    "decode",
    "encode",
    "error_from_event",
    "split_text",
]

logger = logging.getLogger("ttsbridge.kitta")

#: Close codes after which a retry is allowed even without an error event (service restart, try again later).
RETRYABLE_CLOSE_CODES: Final[frozenset[int]] = frozenset({1012, 1013})
#: Out-of-order audio frames held before giving up on the gap and releasing them in order anyway.
MAX_HELD_FRAMES: Final = 64

_SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(ServerEvent)
_KNOWN_SERVER_EVENTS: Final = frozenset({"authenticated", "ready", "audio", "usage", "finish", "error"})


class State(str, enum.Enum):
    CONNECTING = "connecting"
    AUTHENTICATED = "authenticated"
    STARTED = "started"
    READY = "ready"
    STREAMING = "streaming"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"
    CLOSED = "closed"


TERMINAL: Final = frozenset({State.FINISHED, State.FAILED, State.CLOSED})


class SegmentStatus(str, enum.Enum):
    PENDING = "pending"  # flushed (or queued), no audio yet: refunded if it fails -> safe to replay
    DELIVERING = "delivering"  # some audio delivered, no usage yet: must never be replayed
    DONE = "done"  # usage received: complete


@dataclass
class Segment:
    """One flushed (billed) segment of this session."""

    index: int
    text: str
    status: SegmentStatus = SegmentStatus.PENDING
    audio_bytes: int = 0
    units: int | None = None


class KittaProtocolError(TTSBridgeError):
    """The server broke the protocol (garbage frame, event out of order), or the caller did."""

    retryable = False


class KittaLimitError(TTSBridgeError, ValueError):
    """A client-side limit would be exceeded; raised before anything is sent."""

    retryable = False

    def __init__(self, limit: str, value: int, maximum: int, message: str) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(message, retryable=False)


class KittaConnectionClosed(TTSConnectionError):
    """The socket closed before ``finish``. Retryable only for close codes 1012/1013."""

    def __init__(self, message: str, *, close_code: int | None, retryable: bool) -> None:
        self.close_code = close_code
        super().__init__(message, retryable=retryable)


# ------------------------------------------------------------------------------------------- encode / decode


def encode(event: ClientEvent) -> bytes:
    """One client event as a MessagePack map (``None`` fields left out)."""
    return msgpack.packb(event.model_dump(exclude_none=True), use_bin_type=True)


def decode(data: bytes | bytearray | memoryview) -> ServerEvent | None:
    """One server frame -> typed event; ``None`` for an event type this client doesn't know (ignored).

    Raises :class:`KittaProtocolError` for a frame that is not a MessagePack map with a known shape.
    """
    try:
        obj = msgpack.unpackb(bytes(data), raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise KittaProtocolError(f"kitta: undecodable server frame ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        raise KittaProtocolError("kitta: server frame is not an event map")
    if obj["event"] not in _KNOWN_SERVER_EVENTS:
        return None
    try:
        return _SERVER_EVENT.validate_python(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise KittaProtocolError(
            f"kitta: malformed {obj['event']!r} event: {'.'.join(map(str, err['loc']))}: {err['msg']}"
        ) from None


def error_from_event(
    event: ErrorEvent, request_id: str | None = None, secrets: tuple[str, ...] = ()
) -> TTSAPIError:
    """Map a server ``error`` event to :class:`TTSAPIError` (the server closes the socket after it).

    ``secrets`` are masked in the server's text (a server may echo the key it was given)."""
    return TTSAPIError(
        redact(event.message or event.code, secrets),
        provider="kitta",
        error_code=redact(event.code, secrets),
        retryable=event.retryable,
        closes_connection=True,
        request_id=event.request_id or request_id,
    )


def error_from_close(
    code: int | None, reason: str = "", secrets: tuple[str, ...] = ()
) -> KittaConnectionClosed:
    retryable = code in RETRYABLE_CLOSE_CODES
    reason = redact(reason, secrets) if reason else reason
    text = f"kitta: connection closed before finish (code {code}{', ' + reason if reason else ''})"
    return KittaConnectionClosed(text, close_code=code, retryable=retryable)


# ----------------------------------------------------------------------------------------------- splitting

_SENTENCE_END = re.compile(r"[.!?…。！？；;]+[\"'”’)\]]*\s+|[。！？]+")
_WORD_END = re.compile(r"\s+")


def _cuts(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split keeping separators attached to the piece before them (pieces join back to ``text``)."""
    pieces: list[str] = []
    start = 0
    for m in pattern.finditer(text):
        if m.end() > start:
            pieces.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _pack(pieces: list[str], limit: int) -> Iterator[str]:
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > limit:
            yield current
            current = ""
        current += piece
    if current:
        yield current


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters that join back to ``text`` exactly.

    Pieces end at sentence boundaries where possible, else at word boundaries, else (one word longer than
    the limit) at ``limit`` characters. Neighbouring short sentences are packed together.
    """
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if len(text) <= limit:
        return [text] if text else []
    out: list[str] = []
    for sentence in _pack(_cuts(text, _SENTENCE_END), limit):
        if len(sentence) <= limit:
            out.append(sentence)
            continue
        words: list[str] = []
        for word in _cuts(sentence, _WORD_END):
            if len(word) <= limit:
                words.append(word)
            else:
                words.extend(word[i : i + limit] for i in range(0, len(word), limit))
        out.extend(_pack(words, limit))
    return out


# ---------------------------------------------------------------------------------------------- the machine


@dataclass
class _Out:
    kind: str  # auth | start | text | flush | stop
    data: bytes


@dataclass
class KittaProtocol:
    """State of one Kitta v2 session (one WebSocket connection). See the module docstring."""

    request_id: str
    request: StartRequest
    auth: str = "header"  # "header" (Authorization on the handshake) or "frame" (in-band auth event)
    token: str | None = field(default=None, repr=False)
    limits: KittaLimits = field(default_factory=KittaLimits)
    #: Masked in error texts built from server text (the key, whatever the auth mode).
    secrets: tuple[str, ...] = field(default=(), repr=False)
    #: Hold ``start`` until :meth:`begin`: the connection authenticates, but no session is started (a warm
    #: standby connection, or a retry's connection opened during its backoff).
    deferred: bool = False

    state: State = field(default=State.CONNECTING, init=False)
    error: TTSBridgeError | None = field(default=None, init=False)
    sample_rate: int | None = field(default=None, init=False)
    channels: int | None = field(default=None, init=False)
    bit_depth: int | None = field(default=None, init=False)
    segments: list[Segment] = field(default_factory=list, init=False)
    #: Characters queued for sending in this session (our estimate of billable units: characters).
    units_sent: int = field(default=0, init=False)
    #: Units the server reported in ``usage`` events.
    units_billed: int = field(default=0, init=False)
    #: Units on ``finish`` (None until finished).
    finish_units: int | None = field(default=None, init=False)
    audio_bytes: int = field(default=0, init=False)
    stop_requested: bool = field(default=False, init=False)

    _outbox: list[_Out] = field(default_factory=list, init=False, repr=False)
    _buffer: list[str] = field(default_factory=list, init=False, repr=False)
    _buffer_chars: int = field(default=0, init=False, repr=False)
    _next_seq: int = field(default=0, init=False, repr=False)
    _held: dict[int, AudioEvent] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.auth not in ("header", "frame"):
            raise ValueError(f"auth must be 'header' or 'frame', got {self.auth!r}")
        if not 1 <= len(self.request_id) <= 128:
            raise ValueError("request_id must have 1-128 characters")
        if self.auth == "frame":
            if not self.token:
                raise ValueError("auth='frame' needs a token")
            self._outbox.append(_Out("auth", encode(AuthEvent(token=self.token))))

    # --------------------------------------------------------------------------------------------- queries

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    @property
    def is_ready(self) -> bool:
        return self.state in (State.READY, State.STREAMING, State.STOPPING)

    @property
    def audio_started(self) -> bool:
        return self.audio_bytes > 0

    @property
    def has_data_to_send(self) -> bool:
        """Whether :meth:`data_to_send` may return frames (cheap check for the I/O loop)."""
        return bool(self._outbox) and not self.terminal

    @property
    def buffered_text(self) -> str:
        return "".join(self._buffer)

    def can_resume(self) -> bool:
        """True if no segment is part-way delivered (so the rest can be replayed on a new session)."""
        return not any(s.status is SegmentStatus.DELIVERING for s in self.segments)

    # ------------------------------------------------------------------------------------------- commands

    def _check_open(self, what: str) -> None:
        if self.terminal:
            raise KittaProtocolError(f"kitta: cannot {what}: session is {self.state.value}")
        if self.stop_requested:
            raise KittaProtocolError(f"kitta: cannot {what} after stop")

    def send_text(self, text: str) -> None:
        """Queue text. Split into text events of at most ``max_text_chars`` at sentence, then word
        boundaries; a flush is inserted early so that no segment exceeds ``max_segment_chars``.

        Raises :class:`KittaLimitError` (and queues nothing) if the session would exceed
        ``max_session_units``.
        """
        self._check_open("send text")
        if not text:
            return
        lim = self.limits
        if self.units_sent + len(text) > lim.max_session_units:
            raise KittaLimitError(
                "max_session_units",
                self.units_sent + len(text),
                lim.max_session_units,
                f"kitta: this text ({len(text)} characters) would bring the session to "
                f"{self.units_sent + len(text)} units, over the limit of {lim.max_session_units}; "
                "nothing was sent. Start a new generation for the rest.",
            )
        # Split at sentence/word boundaries into pieces that fit both a text event and a segment, so that an
        # early flush always falls between two pieces.
        for piece in split_text(text, min(lim.max_text_chars, lim.max_segment_chars)):
            if self._buffer_chars + len(piece) > lim.max_segment_chars:
                self._flush_buffer(early=True)
            self._outbox.append(_Out("text", encode(TextEvent(text=piece))))
            self._buffer.append(piece)
            self._buffer_chars += len(piece)
            self.units_sent += len(piece)

    def flush(self) -> bool:
        """Close the current segment (a billed unit of generation). No-op (False) if nothing but
        whitespace is buffered: whitespace stays buffered and leads the next segment."""
        self._check_open("flush")
        return self._flush_buffer(early=False)

    def _flush_buffer(self, *, early: bool) -> bool:
        text = "".join(self._buffer)
        if not text.strip():
            return False
        if early:
            logger.debug(
                "kitta %s: flushing early to keep the segment under %d characters",
                self.request_id,
                self.limits.max_segment_chars,
            )
        self.segments.append(Segment(index=len(self.segments), text=text))
        self._outbox.append(_Out("flush", encode(FlushEvent())))
        self._buffer.clear()
        self._buffer_chars = 0
        return True

    def stop(self) -> None:
        """No more text: the server flushes what is left (one last segment) and sends ``finish``."""
        if self.stop_requested or self.terminal:
            return
        text = "".join(self._buffer)
        if text.strip():
            self.segments.append(Segment(index=len(self.segments), text=text))
        self._buffer.clear()
        self._buffer_chars = 0
        self.stop_requested = True
        self._outbox.append(_Out("stop", encode(StopEvent())))

    def begin(self, request_id: str | None = None, request: StartRequest | None = None) -> None:
        """Release the held ``start`` of a deferred session, optionally for another ``request_id`` and
        ``request`` (the user-intended generation that takes this connection)."""
        if not self.deferred:
            raise KittaProtocolError("kitta: begin() on a session that was not deferred")
        if self.terminal:
            raise KittaProtocolError(f"kitta: cannot start: session is {self.state.value}")
        if request_id is not None:
            if not 1 <= len(request_id) <= 128:
                raise ValueError("request_id must have 1-128 characters")
            self.request_id = request_id
        if request is not None:
            self.request = request
        self.deferred = False
        if self.state is State.AUTHENTICATED:
            self._queue_start()

    def _queue_start(self) -> None:
        self._outbox.insert(
            0, _Out("start", encode(StartEvent(request_id=self.request_id, request=self.request)))
        )

    def close(self) -> None:
        """The client closed the session (cancel, retire): nothing more is sent or delivered."""
        if not self.terminal:
            self.state = State.CLOSED
        self._outbox.clear()
        self._held.clear()

    def data_to_send(self) -> list[bytes]:
        """Frames that may be written now, in order (phase rules applied)."""
        out: list[bytes] = []
        if self.terminal:
            self._outbox.clear()
            return out
        while self._outbox:
            item = self._outbox[0]
            if item.kind == "auth":
                pass
            elif item.kind == "start":
                if self.state is not State.AUTHENTICATED:
                    break
                self.state = State.STARTED
            elif not self.is_ready:
                break
            elif item.kind == "stop":
                self.state = State.STOPPING
            elif self.state is State.READY:
                self.state = State.STREAMING
            out.append(item.data)
            self._outbox.pop(0)
        return out

    # ------------------------------------------------------------------------------------------- receiving

    def receive(self, data: bytes | bytearray | memoryview) -> list[ServerEvent]:
        """Feed one binary frame; returns the events it releases (audio in sequence order).

        A protocol violation moves the session to ``failed`` and raises :class:`KittaProtocolError`.
        An ``error`` event moves it to ``failed`` with :attr:`error` set (and is returned).
        """
        if self.terminal:
            return []
        try:
            event = decode(data)
        except KittaProtocolError as exc:
            self._fail(exc)
            raise
        if event is None:
            return []
        try:
            return self._handle(event)
        except KittaProtocolError as exc:
            self._fail(exc)
            raise

    def fail(self, exc: TTSBridgeError) -> None:
        """Mark the session failed with ``exc`` (e.g. the handshake failed). No-op once terminal."""
        if not self.terminal:
            self._fail(exc)

    def _fail(self, exc: TTSBridgeError) -> None:
        if self.error is None:
            self.error = exc
        self.state = State.FAILED
        self._outbox.clear()

    def _handle(self, event: Any) -> list[ServerEvent]:
        if isinstance(event, ErrorEvent):
            released = self._drain_held()
            self._fail(error_from_event(event, self.request_id, self._secrets()))
            return [*released, event]
        if isinstance(event, AuthenticatedEvent):
            if self.state is not State.CONNECTING:
                raise KittaProtocolError(f"kitta: 'authenticated' in state {self.state.value}")
            self.state = State.AUTHENTICATED
            if not self.deferred:
                self._queue_start()
            return [event]
        if isinstance(event, ReadyEvent):
            if self.state is not State.STARTED:
                raise KittaProtocolError(f"kitta: 'ready' in state {self.state.value}")
            if event.request_id != self.request_id:
                raise KittaProtocolError("kitta: 'ready' for another request_id")
            self.sample_rate = event.sample_rate or self.sample_rate
            self.channels = event.channels or self.channels
            self.bit_depth = event.bit_depth or self.bit_depth
            self._check_layout()
            self.state = State.READY
            return [event]
        if not self.is_ready:
            raise KittaProtocolError(f"kitta: {event.event!r} before 'ready' (state {self.state.value})")
        if isinstance(event, AudioEvent):
            return self._on_audio(event)
        if isinstance(event, UsageEvent):
            released = self._drain_held()
            seg = self._head_segment()
            if seg is not None:
                seg.status = SegmentStatus.DONE
                seg.units = event.units
            self.units_billed += event.units
            return [*released, event]
        if isinstance(event, FinishEvent):
            released = self._drain_held()
            for seg in self.segments:
                if seg.status is not SegmentStatus.DONE:
                    seg.status = SegmentStatus.DONE
            self.finish_units = event.units
            self.state = State.FINISHED
            return [*released, event]
        return []  # pragma: no cover - every known event is handled above

    def _secrets(self) -> tuple[str, ...]:
        return (*self.secrets, self.token) if self.token else self.secrets

    def _check_layout(self) -> None:
        if self.channels not in (None, 1) or self.bit_depth not in (None, 16):
            raise KittaProtocolError(
                f"kitta: unsupported PCM layout channels={self.channels} bit_depth={self.bit_depth} "
                "(this client handles mono 16-bit)"
            )

    def _head_segment(self) -> Segment | None:
        for seg in self.segments:
            if seg.status is not SegmentStatus.DONE:
                return seg
        return None

    def _on_audio(self, event: AudioEvent) -> list[ServerEvent]:
        if event.request_id is not None and event.request_id != self.request_id:
            raise KittaProtocolError("kitta: audio for another request_id")
        if event.sample_rate is not None:
            self.sample_rate = event.sample_rate
        self.channels = event.channels or self.channels
        self.bit_depth = event.bit_depth or self.bit_depth
        self._check_layout()
        if self.sample_rate is None:
            raise KittaProtocolError("kitta: pcm audio without sample_rate on 'ready' or 'audio'")
        if event.audio:
            # Received is delivered, even while held for a sequence gap: the server committed (billed) the
            # segment at its first audio frame, so it must never be replayed.
            seg = self._head_segment()
            if seg is not None:
                seg.status = SegmentStatus.DELIVERING
        if event.seq is None:
            return self._deliver([event])
        if event.seq < self._next_seq or event.seq in self._held:
            logger.warning("kitta %s: dropping duplicate/late audio seq=%d", self.request_id, event.seq)
            return []
        self._held[event.seq] = event
        ready: list[AudioEvent] = []
        while self._next_seq in self._held:
            ready.append(self._held.pop(self._next_seq))
            self._next_seq += 1
        if len(self._held) > MAX_HELD_FRAMES:
            logger.warning(
                "kitta %s: audio sequence gap at %d; releasing held frames", self.request_id, self._next_seq
            )
            ready.extend(self._drain_held_events())
        return self._deliver(ready)

    def _drain_held_events(self) -> list[AudioEvent]:
        events = [self._held[k] for k in sorted(self._held)]
        if events:
            self._next_seq = (events[-1].seq or 0) + 1
        self._held.clear()
        return events

    def _drain_held(self) -> list[ServerEvent]:
        return list(self._deliver(self._drain_held_events()))

    def _deliver(self, events: list[AudioEvent]) -> list[ServerEvent]:
        for ev in events:
            if not ev.audio:
                continue
            seg = self._head_segment()
            if seg is not None:
                seg.status = SegmentStatus.DELIVERING
                seg.audio_bytes += len(ev.audio)
            self.audio_bytes += len(ev.audio)
        return list(events)

    def connection_lost(self, code: int | None, reason: str = "") -> TTSBridgeError | None:
        """The socket closed. Returns the error for the session (None after ``finish`` or a local close)."""
        if self.state in (State.FINISHED, State.CLOSED):
            return None
        if self.state is not State.FAILED:
            self._fail(error_from_close(code, reason, self._secrets()))
        return self.error

    # --------------------------------------------------------------------------------------------- retries

    def replay_into(self, other: KittaProtocol) -> int:
        """Queue on ``other`` (a fresh session) everything of this one whose audio was never delivered:
        pending segments, the unflushed buffer, and ``stop`` if it was requested. Returns the number of
        segments replayed. Call only when :meth:`can_resume` is true."""
        if not self.can_resume():
            raise KittaProtocolError("kitta: a segment was part-way delivered; it must not be replayed")
        replayed = 0
        for seg in self.segments:
            if seg.status is SegmentStatus.PENDING:
                other.send_text(seg.text)
                other.flush()
                replayed += 1
        if self._buffer:
            other.send_text("".join(self._buffer))
        if self.stop_requested:
            other.stop()
        return replayed
