"""The facts of one Nineninesix context (one attempt of a turn), and the verdicts read from them.

:class:`ContextFacts` is written only by :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol` (and the
functions here, which it owns); the client's context and the provider's turn keep a reference and read it,
also after the protocol dropped the finished context.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from typing import NoReturn

from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError
from ttsbridge.nineninesix.catalog import effect_of
from ttsbridge.nineninesix.states import ContextState


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
    error: TTSBridgeError | None = None
    cancel_requested: bool = False
    carry: bytes = b""  # an odd trailing byte of PCM16, kept for the next chunk
    last_sent: float = -math.inf
    last_heard: float = 0.0
    ack_deadline: float = math.inf


def may_retry(facts: ContextFacts, err: BaseException, max_retries: int) -> bool:
    """Whether the turn may be replayed on a fresh context: the catalog says the server only dropped the
    context (``concurrent_limit``), or the connection was lost before any frame of it was written (the server
    never heard of it). Never once audio was delivered, never beyond ``max_retries``."""
    if facts.audio_bytes or facts.retries >= max_retries:
        return False
    if isinstance(err, TTSAPIError):
        return effect_of(err.error_code, err.status_code).fresh_context
    return isinstance(err, TTSConnectionError) and not facts.frames_sent


def begin_retry(facts: ContextFacts) -> tuple[int, str]:
    """Count a retry of the failed context: ``(attempt, fresh context_id)``."""
    facts.retries += 1
    return facts.retries, str(uuid.uuid4())


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


__all__ = ["ContextFacts", "begin_retry", "may_retry", "refuse"]
