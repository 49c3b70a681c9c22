"""The one provider-neutral event vocabulary a :class:`~ttsbridge.engine.protocol.TurnProtocol` emits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ttsbridge.errors import TTSBridgeError


@dataclass(frozen=True, slots=True)
class AudioReceived:
    """Audio of one turn: PCM16 LE mono at the wire rate (G.711 already decoded, never empty). ``first``: the
    turn's first audio, a scheduling hint (the connection lets it reach the framework before it parses more),
    not part of the event's value."""

    turn_id: str
    pcm: bytes
    first: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class TurnDone:
    """The turn is over: completed, or ``cancelled`` (what the caller asked for). Nothing follows."""

    turn_id: str
    cancelled: bool = False


@dataclass(frozen=True)
class RetryPlan:
    """How a failed turn goes on, decided by the protocol at the failure: a new attempt ``turn_id`` opened with
    ``request`` (its replay included) on a connection dialled at ``dial_at`` (default ``not_before``), whose
    first request goes out no earlier than ``not_before`` (loop time)."""

    turn_id: str
    request: Any
    not_before: float
    dial_at: float | None = None


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The attempt failed with ``error`` (typed; its ``retryable`` says whether a retry can help). Nothing
    follows on it. ``retry``: the protocol's plan for the turn's next attempt (None: the turn fails)."""

    turn_id: str
    error: TTSBridgeError
    retry: RetryPlan | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """The connection is (or is about to be) closed by ``error``. Every live turn on it got its end first."""

    error: TTSBridgeError


Event = AudioReceived | TurnDone | TurnFailed | ConnectionFailed
TurnEvent = AudioReceived | TurnDone | TurnFailed

__all__ = ["AudioReceived", "ConnectionFailed", "Event", "RetryPlan", "TurnDone", "TurnEvent", "TurnFailed"]
