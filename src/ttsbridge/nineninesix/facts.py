"""The facts of one Nineninesix context (one attempt of a turn), and the verdicts read from them.

:class:`ContextFacts` is written only by :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol` (and the
functions here, which it owns); the client's context and the provider's turn keep a reference and read it,
also after the protocol dropped the finished context.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import uuid
from dataclasses import dataclass, field
from typing import NoReturn

from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.protocol import RetryPlan
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError, TTSSilentConnectionError
from ttsbridge.nineninesix.catalog import effect_of
from ttsbridge.nineninesix.models import OutputFormat
from ttsbridge.nineninesix.states import ContextState

logger = logging.getLogger("ttsbridge.nineninesix")


@dataclass(frozen=True)
class NineninesixRequest:
    """The typed request of one Nineninesix attempt (``NineninesixProtocol.open_turn``): the format (it picks
    the pooled connection), model, voice and language; how often and with which backoff the protocol plans
    a retry (``max_retries``, ``backoff``: None retries at once); the turn's own audio-owed bound
    (``receive_timeout``, None: the connection's). A retry's request also carries the turn over: every text
    so far (``texts``, replayed), whether it was ended, the attempt counts and the first attempt's deadline
    for its first audio (``not_after``)."""

    output_format: OutputFormat = field(default_factory=OutputFormat)
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    max_retries: int = 0
    backoff: Backoff | None = None
    receive_timeout: float | None = None
    #: False: never retried (a bare context of the client).
    retry: bool = True
    texts: tuple[str, ...] = ()
    ended: bool = False
    retries: int = 0
    replays: int = 0
    not_after: float = math.inf


@dataclass(eq=False, slots=True)
class ContextFacts:
    """What is known of one context (one attempt of a turn). Written only by the protocol."""

    context_id: str
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    state: ContextState = ContextState.OPEN
    texts: list[str] = field(default_factory=list)  # every text of the turn, for a replay
    ended: bool = False
    chars: int = 0
    #: Frames of it handed to the socket: from the first on, the server may know the context.
    frames_sent: int = 0
    audio_bytes: int = 0
    retries: int = 0
    #: Replays of the turn after its connection died before any audio (at most :data:`MAX_REPLAYS`).
    replays: int = 0
    #: A replayed turn's deadline for its first audio: its first attempt's (the user's deadline holds).
    not_after: float = math.inf
    error: TTSBridgeError | None = None
    cancel_requested: bool = False
    carry: bytes = b""  # an odd trailing byte of PCM16, kept for the next chunk
    last_sent: float = -math.inf
    last_heard: float = 0.0
    ack_deadline: float = math.inf
    #: The request it was opened with (what a retry carries on), and its audio-owed bound.
    request: NineninesixRequest | None = None
    receive_timeout: float = 15.0

    @property
    def characters_sent(self) -> int:
        return self.chars


#: How often one turn is replayed after its connection went silent (a ping unanswered) before any audio.
MAX_REPLAYS = 1


def connection_died(err: BaseException) -> bool:
    """``err`` says the connection died under the context without a word: the engine's ping went unanswered
    (:class:`~ttsbridge.errors.TTSSilentConnectionError`). A close or a drop is a loud end, judged as before
    (retried only when the server never heard of the context)."""
    return isinstance(err, TTSSilentConnectionError)


def may_retry(facts: ContextFacts, err: BaseException, max_retries: int) -> bool:
    """Whether the turn may be replayed on a fresh context: the catalog says the server only dropped the
    context (``concurrent_limit``: up to ``max_retries``), the connection was lost before any frame of it was
    written (the server never heard of it: up to ``max_retries``), or the connection went silent under it
    before any of its audio arrived (once: :data:`MAX_REPLAYS`; a new context_id on a fresh connection).
    Never once audio was delivered."""
    if facts.audio_bytes:
        return False
    if facts.retries < max_retries:
        if isinstance(err, TTSAPIError):
            return effect_of(err.error_code, err.status_code).fresh_context
        if isinstance(err, TTSConnectionError) and not facts.frames_sent:
            return True
    return connection_died(err) and facts.replays < MAX_REPLAYS


def begin_retry(facts: ContextFacts, err: BaseException | None = None) -> tuple[int, str]:
    """Count a retry of the failed context: ``(attempt, fresh context_id)``; a replay after the connection
    went silent counts as one of its :data:`MAX_REPLAYS`."""
    facts.retries += 1
    if err is not None and connection_died(err):
        facts.replays += 1
    return facts.retries, str(uuid.uuid4())


def replay_deadline(facts: ContextFacts, receive_timeout: float | None = None) -> float:
    """The deadline a replay of ``facts`` keeps for its first audio: the failed attempt's own (when the
    server began to owe it audio, plus its ``receive_timeout``), never later than an earlier attempt's."""
    owed = max(facts.last_sent, facts.last_heard)
    bound = facts.receive_timeout if receive_timeout is None else receive_timeout
    return min(facts.not_after, owed + bound)


def plan_retry(facts: ContextFacts, now: float) -> RetryPlan | None:
    """The retry of a failed context (None: it is not retried): a fresh context_id replaying the turn's texts
    (and its end) when :func:`may_retry` says so; after the backoff, or at once when its connection died under
    it (then keeping the first attempt's deadline for the first audio). Counts the attempt in ``facts``."""
    err, req = facts.error, facts.request or NineninesixRequest()
    if err is None or not req.retry or not may_retry(facts, err, req.max_retries):
        return None
    replays = facts.replays
    attempt, fresh_id = begin_retry(facts, err)
    replay = facts.replays > replays  # the connection died under it: a fresh one, no backoff needed
    delay = 0.0 if replay or req.backoff is None else req.backoff.delay(attempt)
    logger.info(
        "nineninesix: %s on context %s; retrying the turn on a fresh context in %.2fs (%d/%d)",
        getattr(err, "error_code", err), facts.context_id, delay, attempt, req.max_retries,
    )  # fmt: skip
    retry = dataclasses.replace(
        req, texts=tuple(facts.texts), ended=facts.ended, retries=attempt, replays=facts.replays,
        not_after=replay_deadline(facts) if replay else facts.not_after,
    )  # fmt: skip
    return RetryPlan(fresh_id, retry, now + delay)


def refuse(facts: ContextFacts, text: str, *, end: bool) -> NoReturn:
    """A command for a context that is over. A failed one keeps the text for a replay, then raises its error."""
    if facts.state is ContextState.FAILED and facts.error is not None:
        if text:
            facts.texts.append(text)
            facts.chars += len(text)
        facts.ended = facts.ended or end
        raise facts.error
    if facts.cancel_requested or facts.state in (ContextState.CANCELLING, ContextState.CANCELLED):
        raise TTSBridgeError(f"context {facts.context_id} was cancelled")
    raise ValueError(f"context {facts.context_id!r} is {facts.state.value}; no more text can be sent")


__all__ = [
    "MAX_REPLAYS",
    "ContextFacts",
    "NineninesixRequest",
    "begin_retry",
    "connection_died",
    "may_retry",
    "plan_retry",
    "refuse",
    "replay_deadline",
]
