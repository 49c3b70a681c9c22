"""Sans-I/O core of the Nineninesix WebSocket protocol.

No sockets here: :class:`NineninesixProtocol` turns calls into the JSON texts to send, and received texts into
events, tracking each context's state and applying the error catalog's effects. The asyncio client is a thin
loop around it. Every state change is unit-testable without a server.

Context states::

    OPEN --end()--> ENDING --done--> DONE          (a done before end() ends nothing: it is ignored)
    OPEN/ENDING --cancel()--> CANCELLING --done(cancelled)/context_not_found--> CANCELLED
                              (without cancel_ack the context is CANCELLED at once)
    OPEN --cancel() before any request was sent (drop_unsent)--> CANCELLED, nothing sent
    any live state --error for it / malformed frame for it / socket-closing error / connection lost--> FAILED
"""

from __future__ import annotations

import enum
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from ttsbridge.audio.g711 import decode_to_pcm16
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError
from ttsbridge.nineninesix.frames import (
    DONE_FIELDS,
    ERROR_FIELDS,
    NineninesixProtocolError,
    chunk_audio,
    context_id_problem,
    decode_frame,
    field_problem,
    malformed,
)
from ttsbridge.nineninesix.models import (
    CancelRequest,
    DoneMessage,
    ErrorMessage,
    GenerationRequest,
    OutputFormat,
    VoiceSpecifier,
)

logger = logging.getLogger("ttsbridge.nineninesix")

PROVIDER = "nineninesix"


class ContextState(enum.Enum):
    OPEN = "open"
    ENDING = "ending"
    DONE = "done"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in (ContextState.DONE, ContextState.CANCELLED, ContextState.FAILED)

    @property
    def accepts_audio(self) -> bool:
        return self in (ContextState.OPEN, ContextState.ENDING)


@dataclass(frozen=True)
class ErrorEffect:
    """What one catalog error does."""

    status_code: int
    closes_socket: bool
    retryable: bool
    #: True when retrying the same configuration can never succeed (key, voice, model, format; not credits)
    fatal: bool
    description: str


#: The error catalog of the WebSocket API and its effects (spec: "Error codes").
ERROR_CATALOG: dict[str, ErrorEffect] = {
    "unknown_model": ErrorEffect(400, True, False, True, "unknown model_id"),
    "concurrent_limit": ErrorEffect(429, False, True, False, "too many concurrent contexts"),
    "insufficient_credits": ErrorEffect(402, True, False, False, "out of credits"),  # can be topped up
    "voice_not_found": ErrorEffect(404, True, False, True, "unknown voice id"),
    "unsupported_container": ErrorEffect(400, True, False, True, "output_format.container not supported"),
    "unsupported_encoding": ErrorEffect(400, True, False, True, "output_format.encoding not supported"),
    "invalid_sample_rate": ErrorEffect(400, True, False, True, "output_format.sample_rate not supported"),
    "generation_failed": ErrorEffect(500, False, True, False, "synthesis failed for this context"),
    "not_initialized": ErrorEffect(503, True, True, False, "the service is not ready"),
    "context_not_found": ErrorEffect(404, False, False, False, "cancel for a context that is not active"),
    "missing_context_id": ErrorEffect(400, False, False, False, "cancel without context_id"),
}


#: Unknown codes: judge by status. 5xx and 429 are worth a retry; other 4xx are not.
def effect_of(error_code: str, status_code: int | None) -> ErrorEffect:
    known = ERROR_CATALOG.get(error_code)
    if known is not None:
        return known
    status = status_code or 500
    retryable = status >= 500 or status in (408, 429)
    # An unknown error is assumed to close the socket: the safe reading (the next turn reconnects).
    return ErrorEffect(status, True, retryable, status in (401, 402, 403), "unknown error")


def api_error(msg: ErrorMessage) -> TTSAPIError:
    eff = effect_of(msg.error_code, msg.status_code)
    text = msg.message or msg.title or eff.description
    return TTSAPIError(
        text,
        provider=PROVIDER,
        error_code=msg.error_code,
        status_code=msg.status_code if msg.status_code is not None else eff.status_code,
        retryable=eff.retryable,
        closes_connection=eff.closes_socket,
        fatal=eff.fatal if msg.error_code in ERROR_CATALOG else None,  # unknown codes: the errors table
        request_id=msg.request_id,
        context_id=msg.context_id,
        title=msg.title,
    )


# --- events -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AudioReceived:
    context_id: str
    pcm: bytes  # PCM16 LE at the connection's sample rate


@dataclass(frozen=True)
class ContextDone:
    context_id: str
    cancelled: bool = False


@dataclass(frozen=True)
class ContextFailed:
    context_id: str
    error: TTSBridgeError


@dataclass(frozen=True)
class ConnectionFailed:
    """The socket is (or is about to be) closed by this error; every live context was failed with it."""

    error: TTSBridgeError


Event = AudioReceived | ContextDone | ContextFailed | ConnectionFailed


@dataclass
class _Context:
    state: ContextState = ContextState.OPEN
    carry: bytes = b""  # an odd trailing byte of PCM16, kept for the next chunk
    format_sent: bool = False
    chars: int = 0
    sent: bool = False  # a generation request was built for it: the server may know the context


@dataclass
class NineninesixProtocol:
    """State of one WebSocket connection: its output format and its contexts."""

    output_format: OutputFormat
    cancel_ack: bool = True
    contexts: dict[str, _Context] = field(default_factory=dict)
    closed: bool = False
    format_sent: bool = False
    dropped_frames: int = 0
    #: Frames the protocol asks the client to send (cancels of turns failed on a malformed chunk).
    outbox: list[str] = field(default_factory=list)

    # --- client -> server ---------------------------------------------------------------------------------

    def open_context(self, context_id: str) -> None:
        if self.closed:
            raise TTSConnectionError("the connection is closed")
        if context_id in self.contexts:
            raise ValueError(f"context {context_id!r} already exists on this connection")
        self.contexts[context_id] = _Context()

    def state(self, context_id: str) -> ContextState | None:
        ctx = self.contexts.get(context_id)
        return ctx.state if ctx else None

    def live_contexts(self) -> list[str]:
        return [cid for cid, c in self.contexts.items() if not c.state.terminal]

    def generation(
        self,
        context_id: str,
        transcript: str,
        *,
        continue_: bool,
        model: str | None = None,
        voice: str | None = None,
        language: str | None = None,
    ) -> str:
        """The JSON text of a generation request. ``continue_=False`` ends the context."""
        ctx = self._require(context_id)
        if ctx.state is not ContextState.OPEN:
            raise ValueError(f"context {context_id!r} is {ctx.state.value}; no more text can be sent")
        req = GenerationRequest(
            transcript=transcript,
            context_id=context_id,
            continue_=continue_,  # type: ignore[call-arg]  # the alias of the wire's `continue`
            model_id=model,
            voice=VoiceSpecifier(id=voice) if voice else None,
            # Every request carries the format: the server fixes it from the first that does, and a
            # context opened later on the same connection must not depend on which came first.
            output_format=self.output_format,
            language=language,
        )
        ctx.chars += len(transcript)
        ctx.sent = True
        if not continue_:
            ctx.state = ContextState.ENDING
        return json.dumps(req.to_wire(), separators=(",", ":"))

    def end(self, context_id: str, **kw: str | None) -> str:
        return self.generation(context_id, "", continue_=False, **kw)

    def cancel(self, context_id: str) -> str | None:
        """The JSON text of a cancel, or None when there is nothing to cancel (already finished)."""
        ctx = self._require(context_id)
        if ctx.state.terminal or ctx.state is ContextState.CANCELLING:
            return None
        ctx.state = ContextState.CANCELLING if self.cancel_ack else ContextState.CANCELLED
        return json.dumps(CancelRequest(context_id=context_id).to_wire(), separators=(",", ":"))

    def drop_unsent(self, context_id: str) -> bool:
        """Cancel locally a live context for which no request was ever sent: the server never heard of it, so
        there is nothing to send (a cancel would only earn a ``context_not_found``). True if it was dropped."""
        ctx = self.contexts.get(context_id)
        if ctx is None or ctx.sent or ctx.state.terminal:
            return False
        ctx.state = ContextState.CANCELLED
        return True

    def forget(self, context_id: str) -> None:
        """Drop a terminal context's bookkeeping (late frames for it are then dropped as unknown)."""
        ctx = self.contexts.get(context_id)
        if ctx is not None and ctx.state.terminal:
            del self.contexts[context_id]

    # --- server -> client ---------------------------------------------------------------------------------

    def receive(self, text: str | bytes) -> list[Event]:
        """Events for one received frame. Frames of unknown, cancelled or finished contexts are dropped.

        A malformed frame fails the turn it names, or every turn on the connection when it names none we can
        read (module docstring of :mod:`~ttsbridge.nineninesix.frames`; docs/nineninesix.md)."""
        raw = decode_frame(text)
        if raw is None:
            # The API sends only JSON text frames; we cannot tell which turn this one was meant for.
            return self.fail_connection(malformed("server", f"not a JSON object ({len(text)} chars)"))
        kind = raw.get("type")
        problem = context_id_problem(raw)
        if problem is not None:
            return self.fail_connection(malformed(str(kind or "server"), problem))
        cid: str | None = raw.get("context_id")
        if kind == "chunk" or (kind is None and "data" in raw and not raw.get("done")):
            # the hot path (every audio frame): the two fields we use, checked by hand, no model validation
            return self._on_chunk(cid, raw.get("data"))
        if kind == "done" or (kind is None and raw.get("done") and "error_code" not in raw):
            problem = field_problem(raw, DONE_FIELDS)
            if problem is not None:
                return self._malformed_end(cid, malformed("done", problem))
            return self._on_done(DoneMessage.model_validate(raw))
        if kind == "error" or (kind is None and "error_code" in raw):
            problem = field_problem(raw, ERROR_FIELDS)
            if problem is not None:
                return self._malformed_end(cid, malformed("error", problem))
            return self._on_error(ErrorMessage.model_validate(raw))
        # timestamps, flush_done and other frames this API does not send: ignore
        self.dropped_frames += 1
        return []

    def connection_lost(self, reason: str = "connection lost") -> list[Event]:
        """The socket closed or dropped: fail every live context at once (no turn waits for a dead socket)."""
        return self.fail_connection(TTSConnectionError(f"nineninesix: {reason}"))

    def fail_connection(self, err: TTSBridgeError) -> list[Event]:
        """Fail every live context with ``err`` and mark the connection closed (the client closes the socket)."""
        if self.closed:
            return []
        self.closed = True
        if isinstance(err, NineninesixProtocolError):
            logger.warning("%s; failing the connection", err)
        return [*self._fail_all(err), ConnectionFailed(err)]

    # --- internals ----------------------------------------------------------------------------------------

    def _require(self, context_id: str) -> _Context:
        ctx = self.contexts.get(context_id)
        if ctx is None:
            raise KeyError(f"unknown context {context_id!r}")
        return ctx

    def _on_chunk(self, context_id: str | None, b64: object) -> list[Event]:
        ctx = self.contexts.get(context_id) if context_id else None
        if ctx is None or not ctx.state.accepts_audio:
            self.dropped_frames += 1
            return []
        try:
            data = chunk_audio(b64)
        except NineninesixProtocolError as err:
            # The turn's audio has a hole we cannot fill: fail it, and stop it on the server (no ack awaited).
            ctx.state = ContextState.FAILED
            assert context_id is not None
            self.outbox.append(
                json.dumps(CancelRequest(context_id=context_id).to_wire(), separators=(",", ":"))
            )
            return [ContextFailed(context_id, err)]  # type: ignore[arg-type]
        if self.output_format.encoding == "pcm_s16le":
            data = ctx.carry + data
            if len(data) % 2:
                ctx.carry, data = data[-1:], data[:-1]
            else:
                ctx.carry = b""
            pcm = data
        else:
            pcm = decode_to_pcm16(data, self.output_format.encoding)
        if not pcm:
            return []
        assert context_id is not None
        return [AudioReceived(context_id, pcm)]

    def _on_done(self, msg: DoneMessage) -> list[Event]:
        cid = msg.context_id
        ctx = self.contexts.get(cid) if cid else None
        if ctx is None or ctx.state.terminal:
            self.dropped_frames += 1
            return []
        assert cid is not None
        if ctx.state is ContextState.OPEN and not msg.cancelled:
            # done comes only after our continue: false. One before it ends nothing: the turn's later text
            # still renders and its audio must not be dropped; our own continue: false brings the real done.
            logger.debug("nineninesix: done for context %s before its continue: false; ignored", cid)
            self.dropped_frames += 1
            return []
        if ctx.state is ContextState.CANCELLING or msg.cancelled:
            ctx.state = ContextState.CANCELLED
            return [ContextDone(cid, cancelled=True)]
        ctx.state = ContextState.DONE
        return [ContextDone(cid)]

    def _on_error(self, msg: ErrorMessage) -> list[Event]:
        err = api_error(msg)
        cid = msg.context_id
        ctx = self.contexts.get(cid) if cid else None
        if msg.error_code == "context_not_found" and ctx is not None and ctx.state is ContextState.CANCELLING:
            # Our cancel raced the context's end: it is over either way.
            ctx.state = ContextState.CANCELLED
            return [ContextDone(cid, cancelled=True)]  # type: ignore[arg-type]
        if msg.error_code in ("context_not_found", "missing_context_id") and (
            ctx is None or not ctx.state.accepts_audio
        ):
            # A reply to a cancel of ours for a context that is gone anyway: nothing to do. (Should the server
            # ever send one for a live context, the branch below ends that context rather than let it hang.)
            logger.debug("nineninesix: cancel answered %s for context %s", msg.error_code, cid)
            return []
        if err.closes_connection:
            self.closed = True
            events: list[Event] = []
            if ctx is not None and ctx.state.accepts_audio:
                ctx.state = ContextState.FAILED
                events.append(ContextFailed(cid, err))  # type: ignore[arg-type]
            events.extend(self._fail_all(err))
            events.append(ConnectionFailed(err))
            return events
        if ctx is None or ctx.state.terminal:
            if cid is None:
                logger.warning("nineninesix: error with no context: %s", err)
            self.dropped_frames += 1
            return []
        if ctx.state is ContextState.CANCELLING:
            # The context ended with an error while we were cancelling it: cancelled is what the caller asked.
            ctx.state = ContextState.CANCELLED
            return [ContextDone(cid, cancelled=True)]  # type: ignore[arg-type]
        ctx.state = ContextState.FAILED
        return [ContextFailed(cid, err)]  # type: ignore[arg-type]

    def _malformed_end(self, cid: str | None, err: NineninesixProtocolError) -> list[Event]:
        """A ``done``/``error`` frame we cannot read: it ends the context it names (the server is done with it,
        so nothing is sent); one that names no context is a connection-level error we cannot read."""
        if cid is None:
            return self.fail_connection(err)
        ctx = self.contexts.get(cid)
        if ctx is None or ctx.state.terminal:
            self.dropped_frames += 1
            return []
        logger.warning("%s (context %s)", err, cid)
        if ctx.state is ContextState.CANCELLING:  # it is over, and cancelled is what the caller asked for
            ctx.state = ContextState.CANCELLED
            return [ContextDone(cid, cancelled=True)]
        ctx.state = ContextState.FAILED
        return [ContextFailed(cid, err)]

    def _fail_all(self, err: TTSBridgeError) -> Iterable[Event]:
        for cid, ctx in self.contexts.items():
            if ctx.state.terminal:
                continue
            if ctx.state is ContextState.CANCELLING:
                ctx.state = ContextState.CANCELLED
                yield ContextDone(cid, cancelled=True)
            else:
                ctx.state = ContextState.FAILED
                yield ContextFailed(cid, err)
