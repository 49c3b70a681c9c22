"""TEMPORARY stand-in for ttsbridge.engine.events / engine.protocol (replaced when the engine branch lands)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from ttsbridge.errors import TTSBridgeError


@dataclass(frozen=True)
class AudioReceived:
    turn_id: str
    pcm: bytes


@dataclass(frozen=True)
class TurnDone:
    turn_id: str
    cancelled: bool = False


@dataclass(frozen=True)
class TurnFailed:
    turn_id: str
    error: TTSBridgeError


@dataclass(frozen=True)
class ConnectionFailed:
    error: TTSBridgeError


Event = Union[AudioReceived, TurnDone, TurnFailed, ConnectionFailed]


@dataclass(frozen=True)
class ConnectRequest:
    url: str
    headers: list[tuple[str, str]] = field(default_factory=list, repr=False)
    subprotocols: list[str] = field(default_factory=list)
