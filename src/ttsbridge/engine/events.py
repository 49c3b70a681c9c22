"""The one provider-neutral event vocabulary a :class:`~ttsbridge.engine.protocol.TurnProtocol` emits."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class TurnFailed:
    """The turn failed with ``error`` (typed; its ``retryable`` says whether a retry can help). Nothing follows."""

    turn_id: str
    error: TTSBridgeError


@dataclass(frozen=True, slots=True)
class ConnectionFailed:
    """The connection is (or is about to be) closed by ``error``. Every live turn on it got its end first."""

    error: TTSBridgeError


Event = AudioReceived | TurnDone | TurnFailed | ConnectionFailed
TurnEvent = AudioReceived | TurnDone | TurnFailed

__all__ = ["AudioReceived", "ConnectionFailed", "Event", "TurnDone", "TurnEvent", "TurnFailed"]
