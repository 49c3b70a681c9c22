"""The server-frame side of :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`, pure: each received
frame is checked (:mod:`.frames`), decoded (base64 -> PCM16 with the odd-byte carry, G.711) and moves its
context's state; a lost or silent connection ends every live context. A mixin, as Kitta's ``receiving.py``."""

from __future__ import annotations

import logging

from ttsbridge.audio.carry import wire_to_pcm16
from ttsbridge.engine import AudioReceived, ConnectionFailed
from ttsbridge.engine.events import Event
from ttsbridge.engine.protocol import describe_close
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSSilentConnectionError
from ttsbridge.nineninesix.catalog import api_error
from ttsbridge.nineninesix.facts import ContextFacts
from ttsbridge.nineninesix.models import DoneMessage, ErrorMessage
from ttsbridge.nineninesix.states import ContextState, Input
from ttsbridge.nineninesix.wire import (
    DONE_FIELDS,
    ERROR_FIELDS,
    NineninesixProtocolError,
    chunk_audio,
    context_id_problem,
    decode_frame,
    field_problem,
    malformed,
)

__all__ = ["LIVE", "ServerFrames"]

logger = logging.getLogger("ttsbridge.nineninesix")

LIVE = (ContextState.OPEN, ContextState.ENDING)
_LIVE = LIVE


class ServerFrames:
    """Mixin of :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`: received frames, lost connections."""

    contexts: dict[str, ContextFacts]
    dropped_frames: int
    _closed: bool
    _encoding: str
    _events: list[Event]
    _queue: list[tuple[ContextFacts | None, str]]

    def _withdraw(self, facts: ContextFacts) -> bool:
        raise NotImplementedError

    def _move(
        self, facts: ContextFacts, event: Input, now: float, error: TTSBridgeError | None = None
    ) -> bool:
        raise NotImplementedError

    def receive(self, frame: str | bytes, now: float) -> None:
        """One received frame. Frames of unknown, cancelled or finished contexts are dropped.

        A malformed frame fails the turn it names, or every turn on the connection when it names none we can
        read (module docstring of :mod:`~ttsbridge.nineninesix.wire`; docs/nineninesix.md)."""
        raw = decode_frame(frame)
        if raw is None:
            # The API sends only JSON text frames; we cannot tell which turn this one was meant for.
            return self._fail_connection(malformed("server", f"not a JSON object ({len(frame)} chars)"), now)
        kind = raw.get("type")
        cid: str | None = raw.get("context_id")
        if cid is not None and type(cid) is not str:
            return self._fail_connection(malformed(str(kind or "server"), context_id_problem(raw) or ""), now)
        if kind == "chunk" or (kind is None and "data" in raw and not raw.get("done")):
            # the hot path (every audio frame): the two fields we use, checked by hand, no model validation
            return self._on_chunk(cid, raw.get("data"), now)
        if kind == "done" or (kind is None and raw.get("done") and "error_code" not in raw):
            problem = field_problem(raw, DONE_FIELDS)
            if problem is not None:
                return self._malformed_end(cid, malformed("done", problem), now)
            return self._on_done(DoneMessage.model_validate(raw), now)
        if kind == "error" or (kind is None and "error_code" in raw):
            problem = field_problem(raw, ERROR_FIELDS)
            if problem is not None:
                return self._malformed_end(cid, malformed("error", problem), now)
            return self._on_error(ErrorMessage.model_validate(raw), now)
        # timestamps, flush_done and other frames this API does not send: ignore
        self.dropped_frames += 1

    def connection_lost(self, code: int | None, reason: str, now: float) -> None:
        """The socket closed or dropped: fail every live context at once (no turn waits for a dead socket)."""
        self._fail_connection(TTSConnectionError(f"nineninesix: {describe_close(code, reason)}"), now)

    def connection_silent(self, detail: str, now: float) -> None:
        """The engine's ping went unanswered: every live context fails with a
        :class:`TTSSilentConnectionError` (a turn with no audio yet is replayed once: :func:`may_retry`)."""
        self._fail_connection(TTSSilentConnectionError(f"nineninesix: {detail}"), now)

    def close(self, error: TTSBridgeError | None, now: float) -> None:
        """The client closes the connection: every live context fails with ``error`` (a connection error
        "closed by the client" when None)."""
        self._fail_connection(error or TTSConnectionError("nineninesix: closed by the client"), now)

    def _fail_connection(self, err: TTSBridgeError, now: float) -> None:
        """End every live context with ``err`` and mark the connection closed (the engine closes the socket)."""
        if self._closed:
            return
        self._closed = True
        if isinstance(err, NineninesixProtocolError):
            logger.warning("%s; failing the connection", err)
        for facts in list(self.contexts.values()):
            self._move(facts, Input.LOST, now, err)
        self._queue.clear()  # never written: the contexts they were for count as unheard
        self._emit(ConnectionFailed(err))

    def _live(self, context_id: str | None, now: float) -> ContextFacts | None:
        facts = self.contexts.get(context_id) if context_id else None
        if facts is None:
            self.dropped_frames += 1
        else:
            facts.last_heard = now
        return facts

    def _on_chunk(self, context_id: str | None, b64: object, now: float) -> None:
        facts = self.contexts.get(context_id) if context_id else None  # the hot path: no helper calls
        if facts is None or facts.state not in _LIVE:  # unknown, or in-flight audio of a cancelled one
            if facts is not None:
                facts.last_heard = now
            self.dropped_frames += 1
            return
        facts.last_heard = now
        try:
            data = chunk_audio(b64)
        except NineninesixProtocolError as err:
            # The turn's audio has a hole we cannot fill: fail it, and stop it on the server (no ack awaited).
            self._withdraw(facts)
            self._move(facts, Input.MALFORMED, now, err)
            return
        pcm, facts.carry = wire_to_pcm16(data, self._encoding, facts.carry)
        if pcm:
            first = not facts.audio_bytes
            facts.audio_bytes += len(pcm)
            self._events.append(AudioReceived(facts.context_id, pcm, first))

    def _on_done(self, msg: DoneMessage, now: float) -> None:
        facts = self._live(msg.context_id, now)
        if facts is None:
            return
        if not self._move(facts, Input.DONE_CANCELLED if msg.cancelled else Input.DONE, now):
            # done comes only after our continue: false. One before it ends nothing: the turn's later text
            # still renders and its audio must not be dropped; our own continue: false brings the real done.
            logger.debug(
                "nineninesix: done for context %s before its continue: false; ignored", msg.context_id
            )
            self.dropped_frames += 1

    def _on_error(self, msg: ErrorMessage, now: float) -> None:
        err = api_error(msg)
        code = msg.error_code
        facts = self.contexts.get(msg.context_id) if msg.context_id else None
        if facts is not None:
            facts.last_heard = now
        answers_cancel = code in ("context_not_found", "missing_context_id")
        if answers_cancel and (facts is None or facts.state not in _LIVE):
            # The answer to a cancel of ours (it raced the context's end): the context is over either way. (An
            # unsolicited one for a live context ends that context below rather than let it hang.)
            logger.debug("nineninesix: cancel answered %s for context %s", code, msg.context_id)
            if facts is not None and code == "context_not_found":
                self._move(facts, Input.NOT_FOUND, now)
            return
        if err.closes_connection:
            if facts is not None and facts.state in _LIVE:
                self._move(facts, Input.ERROR, now, err)
            self._fail_connection(err, now)
            return
        if facts is None:
            if msg.context_id is None:
                logger.warning("nineninesix: error with no context: %s", err)
            self.dropped_frames += 1
            return
        self._move(facts, Input.NOT_FOUND if code == "context_not_found" else Input.ERROR, now, err)

    def _malformed_end(self, cid: str | None, err: NineninesixProtocolError, now: float) -> None:
        """A ``done``/``error`` frame we cannot read: it ends the context it names (the server is done with it,
        so nothing is sent); one that names no context is a connection-level error we cannot read."""
        if cid is None:
            return self._fail_connection(err, now)
        facts = self.contexts.get(cid)
        if facts is None:
            self.dropped_frames += 1
            return
        logger.warning("%s (context %s)", err, cid)
        self._move(facts, Input.MALFORMED, now, err)
