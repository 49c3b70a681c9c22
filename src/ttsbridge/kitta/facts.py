"""Kitta retry policy, pure (clock passed in): what one turn has done across its attempts, whether a failed
attempt is retried, and the attempt that follows it (a fresh session on a new connection with a derived
``request_id``, only never-delivered segments replayed, ``start`` held for the backoff from the failure)."""

from __future__ import annotations

import enum
import logging
import random
from dataclasses import dataclass, field
from typing import Final, Protocol

from ttsbridge.engine.protocol import RetryPlan
from ttsbridge.errors import TTSBridgeError
from ttsbridge.kitta.catalog import backoff_delay, retry_request_id
from ttsbridge.kitta.models import StartRequest

# fmt: off
__all__ = [
    "Attempt", "KittaRequest", "Outcome", "Replay", "TurnFacts", "backoff", "no_retry_reason", "plan_retry",
]
# fmt: on

logger = logging.getLogger("ttsbridge.kitta")

#: A retry's connection is opened this long before its backoff ends (its handshake overlaps the backoff).
PRECONNECT_LEAD: Final = 2.0


class Outcome(str, enum.Enum):
    FINISHED = "finished"
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass
class TurnFacts:
    """One user-intended turn across its attempts; the one record of it, shared by a protocol and its
    successors (the adapters' characters, audio_started, retries and outcome are read here)."""

    base_id: str
    ids: list[str]
    retries: int = 0
    characters_sent: int = 0
    units: int = 0
    audio_bytes: int = 0
    #: (characters of the turn's text, audio bytes delivered) at each segment's ``usage``: the audio of
    #: that much text is complete there (cumulative over the turn and its retries)
    rendered: list[tuple[int, int]] = field(default_factory=list)
    rendered_chars: int = 0
    outcome: Outcome | None = None
    error: TTSBridgeError | None = None
    failed_at: float | None = None
    #: ``stop`` was asked (no more text for the turn).
    ended: bool = False


@dataclass(frozen=True)
class Replay:
    """What a retried attempt hands its successor: the texts of the segments none of whose audio was
    delivered, the unflushed buffer, and whether ``stop`` was asked."""

    segments: tuple[str, ...] = ()
    buffer: str = ""
    stop: bool = False


@dataclass(frozen=True)
class KittaRequest:
    """The typed request of one Kitta attempt (``KittaProtocol.open_turn``): the ``start`` request (None: the
    protocol's own), no ``start`` before ``not_before`` (loop time), whether every ``send_text`` closes its
    segment (``flush_each_send``: the turn interface sends whole sentences), and for a retry the turn's
    record (``facts``, shared by its attempts) and what it replays."""

    start: StartRequest | None = None
    not_before: float | None = None
    flush_each_send: bool = False
    facts: TurnFacts | None = field(default=None, compare=False)
    replay: Replay | None = None
    #: The turn's longest server silence while it owes something (None: the connection's).
    event_timeout: float | None = None


class Attempt(Protocol):
    """What the retry policy reads of one attempt (a :class:`~ttsbridge.kitta.protocol.KittaProtocol`).
    Declared here so that this module does not import the protocol that imports it."""

    backoff_initial: float
    backoff_max: float
    max_retries: int
    resume_after_audio: bool
    rng: random.Random | None
    units_billed: int
    event_timeout: float
    request: StartRequest
    flush_each_send: bool

    @property
    def facts(self) -> TurnFacts | None: ...

    @property
    def request_id(self) -> str: ...

    def _can_resume(self) -> bool: ...

    def _replay(self) -> Replay: ...


def backoff(proto: Attempt, attempt: int, err: TTSBridgeError) -> float:
    return backoff_delay(attempt, err, proto.backoff_initial, proto.backoff_max, proto.rng)


def no_retry_reason(proto: Attempt, err: TTSBridgeError, facts: TurnFacts) -> str:
    """Why the failed attempt ``proto`` is not retried ("" = it is)."""
    if not err.retryable:
        return "not retryable"
    if not proto._can_resume():
        return "audio of the failed segment was already delivered (never replayed)"
    if facts.audio_bytes and not proto.resume_after_audio:
        return "audio was already delivered"
    if facts.retries >= proto.max_retries:
        return f"gave up after {facts.retries} retries"
    return ""


def plan_retry(proto: Attempt, err: TTSBridgeError, now: float) -> RetryPlan | None:
    """The turn's next attempt after ``proto`` failed with ``err`` at ``now`` (a derived request_id, the
    never-delivered segments replayed, ``start`` held for the backoff, its connection dialled
    :data:`PRECONNECT_LEAD` before), or None (the turn fails). Counts the retry in the turn's facts."""
    facts = proto.facts
    assert facts is not None
    reason = no_retry_reason(proto, err, facts)
    if reason:
        logger.warning("kitta %s: %s; %s", proto.request_id, err, reason)
        return None
    facts.retries += 1
    facts.units += proto.units_billed
    new_id = retry_request_id(facts.base_id, facts.retries)
    delay = backoff(proto, facts.retries, err)
    replay = proto._replay()
    facts.ids.append(new_id)
    logger.warning(
        "kitta %s: %s; retry %d/%d as %s in %.2f s (%d segment(s) replayed)",
        proto.request_id,
        err,
        facts.retries,
        proto.max_retries,
        new_id,
        delay,
        len(replay.segments),
    )
    request = KittaRequest(
        proto.request, now + delay, proto.flush_each_send, facts, replay, event_timeout=proto.event_timeout
    )
    return RetryPlan(new_id, request, now + delay, dial_at=now + delay - PRECONNECT_LEAD)
