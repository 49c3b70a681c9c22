"""Sans-I/O core of the Nineninesix WebSocket protocol: a :class:`~ttsbridge.engine.TurnProtocol`.

No sockets and no clock here (``now`` is passed in). :class:`NineninesixProtocol` is the state of one
connection: its URL, its output format and its contexts (one per turn attempt). Commands queue frames
(``data_to_send()``), received frames become engine events (``events_received()``), the error catalog's
effects are applied (:mod:`.catalog`), transitions follow the table in :mod:`.states`, and the audio-owed
deadline is a ``next_deadline()`` / ``tick(now)`` pair. The facts of each context live in its
:class:`ContextFacts`, written only here; the client's context object keeps a reference and reads it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ttsbridge.engine import (
    ConnectRequest,
    TurnDone,
    TurnFailed,
    TurnProtocol,
)
from ttsbridge.errors import (
    TTSBridgeError,
    TTSConnectionError,
    TTSTimeoutError,
)
from ttsbridge.nineninesix.billing import turn_usage
from ttsbridge.nineninesix.catalog import (
    ERROR_CATALOG,
    PROVIDER,
    ErrorEffect,
    api_error,
    derive_urls,
    effect_of,
    handshake_error,
    ws_url,
)
from ttsbridge.nineninesix.facts import (
    ContextFacts,
    NineninesixRequest,
    begin_retry,
    may_retry,
    plan_retry,
    refuse,
)
from ttsbridge.nineninesix.models import (
    DEFAULT_BASE_URL,
    CancelRequest,
    GenerationRequest,
    OutputFormat,
    VoiceSpecifier,
)
from ttsbridge.nineninesix.receiving import ServerFrames
from ttsbridge.nineninesix.states import ContextState, Input, next_state
from ttsbridge.policy.usage import TurnUsage

if TYPE_CHECKING:
    from ttsbridge.turns import Turn

logger = logging.getLogger("ttsbridge.nineninesix")

_LIVE = (ContextState.OPEN, ContextState.ENDING)
_ANSWER_OWED = (ContextState.CANCELLING, ContextState.FAILING)  # our cancel is on the wire


def _cancel_frame(context_id: str) -> str:
    return json.dumps(CancelRequest(context_id=context_id).to_wire(), separators=(",", ":"))


class NineninesixProtocol(ServerFrames, TurnProtocol):
    """One WebSocket connection: its output format and its contexts."""

    provider = PROVIDER

    def __init__(
        self,
        output_format: OutputFormat,
        cancel_ack: bool = True,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str = "",
        receive_timeout: float = 15.0,
        ack_wait: float = 0.5,
        cancel_timeout: float = 2.0,
    ) -> None:
        super().__init__()
        self.output_format = output_format
        self.cancel_ack = cancel_ack
        self.base_url = base_url
        self._api_key = api_key
        self.receive_timeout = receive_timeout
        self.ack_wait = ack_wait  # how long a timed-out context waits for its cancel's answer
        self.cancel_timeout = cancel_timeout  # how long a cancelled context waits for its answer
        self.contexts: dict[str, ContextFacts] = {}  # live contexts only: a finished one is dropped at once
        self.sample_rate = output_format.sample_rate
        self.dropped_frames = 0
        self._closed = False
        self._encoding = output_format.encoding
        self._queue: list[tuple[ContextFacts | None, str]] = []
        self._fields: dict[tuple[str | None, str | None, str | None], dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"NineninesixProtocol({self._encoding}@{self.output_format.sample_rate}, live={len(self.contexts)})"

    # --- handshake ----------------------------------------------------------------------------------------

    def connect_request(self) -> ConnectRequest:
        secrets = (self._api_key,) if self._api_key else ()
        return ConnectRequest(ws_url(self.base_url, self._api_key, self.cancel_ack), secrets=secrets)

    def handshake_failed(self, status: int, body: bytes) -> TTSBridgeError:
        return handshake_error(status, body, self._api_key)

    # --- outputs ------------------------------------------------------------------------------------------

    def data_to_send(self) -> list[str | bytes]:
        queue, self._queue = self._queue, []
        for facts, _ in queue:
            if facts is not None:
                facts.frames_sent += 1
        return [frame for _, frame in queue]

    def has_data_to_send(self) -> bool:
        return bool(self._queue)

    def next_deadline(self) -> float | None:
        return self._earliest(self._due)

    def _earliest(self, when: Callable[[ContextFacts], float | None]) -> float | None:
        """The earliest of ``when(facts)`` over the live contexts (None: none has one)."""
        best: float | None = None
        for facts in self.contexts.values():
            at = when(facts)
            if at is not None and (best is None or at < best):
                best = at
        return best

    def tick(self, now: float) -> None:
        for facts in list(self.contexts.values()):
            due = self._due(facts)
            if due is None or now < due:
                continue
            if facts.state in _ANSWER_OWED:
                logger.warning("nineninesix: no cancel acknowledgement for context %s", facts.context_id)
                self._move(facts, Input.ACK_TIMEOUT, now)
                continue
            err = TTSTimeoutError(
                f"nineninesix: no audio for context {facts.context_id} within {facts.receive_timeout:.1f}s"
            )
            self.timeouts += 1
            # cancel it on the server: the context must not go on generating unheard
            if self._withdraw(facts) and self.cancel_ack:
                facts.ack_deadline = now + self.ack_wait
                facts.last_sent = now
                self._move(facts, Input.TIMEOUT, now, err)  # reported once the server answers (bounded)
            else:
                self._move(facts, Input.TIMEOUT_NOW, now, err)

    def _due(self, facts: ContextFacts) -> float | None:
        """When ``facts`` needs a tick: the server owes it something (text sent since we last heard, or the
        end of the turn) and stays silent ``receive_timeout``; or its cancel's answer is overdue. A replayed
        turn keeps its first attempt's deadline until its first audio (``not_after``)."""
        if facts.state in _ANSWER_OWED:
            return facts.ack_deadline
        owed = self._owed_since(facts)
        if owed is None:
            return None
        due = owed + facts.receive_timeout
        return due if facts.audio_bytes else min(due, facts.not_after)

    @staticmethod
    def _owed_since(facts: ContextFacts) -> float | None:
        if facts.state in _ANSWER_OWED:
            return facts.last_sent  # (the cancel went out then)
        if facts.state is ContextState.ENDING or (
            facts.state is ContextState.OPEN and facts.last_sent >= facts.last_heard
        ):
            return max(facts.last_sent, facts.last_heard)
        return None

    def awaiting_since(self) -> float | None:
        """The earliest time since which the server owes a live context something (audio for text sent, the
        end of an ended turn, a cancel's answer): the engine's liveness check counts silence from it."""
        return self._earliest(self._owed_since)

    # --- commands -----------------------------------------------------------------------------------------

    def open_turn(self, turn_id: str, request: NineninesixRequest | None, now: float) -> ContextFacts:
        """A new context for ``request`` (a retry's replays the turn's texts, and its end, at once)."""
        if self._closed:
            raise TTSConnectionError("the connection is closed")
        if turn_id in self.contexts:
            raise ValueError(f"context {turn_id!r} already exists on this connection")
        req = request or NineninesixRequest(self.output_format)
        facts = ContextFacts(
            turn_id, req.model, req.voice, req.language, retries=req.retries, replays=req.replays,
            not_after=req.not_after, last_heard=now, request=req,
            receive_timeout=req.receive_timeout or self.receive_timeout,
        )  # fmt: skip
        self.contexts[turn_id] = facts
        for text in req.texts:
            self._generation(facts, text, True, now)
        if req.ended:
            self._generation(facts, "", False, now)
        return facts

    def send_text(self, turn_id: str, text: str, now: float) -> None:
        if text.strip():  # the server trims transcripts: an empty one is only useful as an end marker
            self._generation(self._require(turn_id), text, True, now)

    def end_turn(self, turn_id: str, now: float) -> None:
        self._generation(self._require(turn_id), "", False, now)

    def cancel_turn(self, turn_id: str, now: float) -> None:
        """Stop the context: dropped locally if the server never heard of it, else a cancel is queued (and,
        with ``cancel_ack``, its answer ends it). Idempotent; nothing for a context that is over."""
        facts = self.contexts.get(turn_id)
        if facts is None:
            return
        facts.cancel_requested = True
        if facts.state not in _LIVE:
            return
        if self._withdraw(facts) and self.cancel_ack:
            facts.ack_deadline = now + self.cancel_timeout
            facts.last_sent = now
            self._move(facts, Input.CANCEL, now)
        else:
            self._move(facts, Input.CANCEL_NOW, now)

    def usage(self, facts: ContextFacts, turn: Turn) -> TurnUsage:
        return turn_usage(facts, turn, self.output_format.sample_rate)

    def wire_format(self) -> str:
        return f"{self._encoding}@{self.output_format.sample_rate}"

    def _withdraw(self, facts: ContextFacts) -> bool:
        """Queue a cancel of ``facts`` if the server may know it (True), else drop its unsent frames."""
        if facts.frames_sent:
            self._queue.append((facts, _cancel_frame(facts.context_id)))
            return True
        self._queue = [(f, frame) for f, frame in self._queue if f is not facts]
        return False

    def _generation(self, facts: ContextFacts, text: str, continue_: bool, now: float) -> None:
        if facts.state is ContextState.FAILING and facts.error is not None:
            raise facts.error
        if facts.state is not ContextState.OPEN:
            refuse(facts, text, end=not continue_)
        wire = {"transcript": text, "context_id": facts.context_id, "continue": continue_}
        wire.update(self._request_fields(facts))
        if text:
            facts.texts.append(text)
            facts.chars += len(text)
        facts.last_sent = now
        self._queue.append((facts, json.dumps(wire, separators=(",", ":"))))
        if not continue_:
            facts.ended = True
            self._move(facts, Input.END, now)

    def _request_fields(self, facts: ContextFacts) -> dict[str, Any]:
        """The wire fields after ``continue`` that are the same for every request of a context (model, voice,
        format, language), as :class:`GenerationRequest` writes them; built once per combination."""
        key = (facts.model, facts.voice, facts.language)
        fields = self._fields.get(key)
        if fields is None:
            req = GenerationRequest(
                transcript="",
                model_id=facts.model,
                voice=VoiceSpecifier(id=facts.voice) if facts.voice else None,
                # Every request carries the format: the server fixes it from the first that does, and a
                # context opened later on the same connection must not depend on which came first.
                output_format=self.output_format,
                language=facts.language,
            )
            fields = req.to_wire()
            for name in ("transcript", "context_id", "continue"):
                fields.pop(name, None)
            self._fields[key] = fields
        return fields

    def _require(self, turn_id: str) -> ContextFacts:
        facts = self.contexts.get(turn_id)
        if facts is None:
            raise KeyError(f"unknown context {turn_id!r}")
        return facts

    # --- queries ------------------------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    # --- transitions --------------------------------------------------------------------------------------

    def _move(
        self, facts: ContextFacts, event: Input, now: float, error: TTSBridgeError | None = None
    ) -> bool:
        """Apply :data:`~.states.TRANSITIONS`; on a terminal state, drop the context and emit its end (a failure
        with its retry, when :func:`~.facts.plan_retry` plans one)."""
        new = next_state(facts.state, event)
        if new is None:
            return False
        facts.state = new
        if error is not None and facts.error is None and new in (ContextState.FAILING, ContextState.FAILED):
            facts.error = error
        if new.terminal:
            self.contexts.pop(facts.context_id, None)
            facts.carry = b""
            if new is ContextState.FAILED:
                assert facts.error is not None
                self._emit(TurnFailed(facts.context_id, facts.error, plan_retry(facts, now)))
            else:
                self._emit(TurnDone(facts.context_id, cancelled=new is ContextState.CANCELLED))
        return True


__all__ = [
    "ERROR_CATALOG",
    "PROVIDER",
    "ContextFacts",
    "ContextState",
    "ErrorEffect",
    "NineninesixProtocol",
    "api_error",
    "begin_retry",
    "derive_urls",
    "effect_of",
    "may_retry",
    "refuse",
    "ws_url",
]
