"""The Kitta session's error type and the request field checks."""

from __future__ import annotations

import re
from typing import Any

from ttsbridge.emulator.kitta.config import CLOSE_INTERNAL, CLOSE_POLICY

_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_EMOTION = re.compile(r"^[a-z][a-z_]{0,31}$")


class SessionError(Exception):
    """Send an error event, then close."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, close_code: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.close_code = (
            close_code if close_code is not None else (CLOSE_INTERNAL if retryable else CLOSE_POLICY)
        )


def check_values(req: dict[str, Any]) -> None:
    def bad(name: str, allowed: str) -> SessionError:
        return SessionError(
            "invalid_parameter", f"request.{name}={req[name]!r} is invalid; allowed: {allowed}"
        )

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if "speed" in req and not (number(req["speed"]) and 0.5 <= req["speed"] <= 2.0):
        raise bad("speed", "0.5..2.0")
    if "volume" in req and not (number(req["volume"]) and -20 <= req["volume"] <= 20):
        raise bad("volume", "-20..20")
    if "language" in req and not (isinstance(req["language"], str) and _LANGUAGE.match(req["language"])):
        raise bad("language", "a language tag such as 'en'")
    if "emotion" in req and not (isinstance(req["emotion"], str) and _EMOTION.match(req["emotion"])):
        raise bad("emotion", "a lowercase word")
    if "chunk_length" in req and not (
        isinstance(req["chunk_length"], int)
        and not isinstance(req["chunk_length"], bool)
        and 100 <= req["chunk_length"] <= 300
    ):
        raise bad("chunk_length", "an int 100..300")
    if "latency" in req and req["latency"] not in ("normal", "balanced"):
        raise bad("latency", "'normal' or 'balanced'")
    if "instructions" in req and not (
        isinstance(req["instructions"], str) and 1 <= len(req["instructions"]) <= 1000
    ):
        raise bad("instructions", "a string of 1..1000 characters")
    if "optimize_instructions" in req and not isinstance(req["optimize_instructions"], bool):
        raise bad("optimize_instructions", "a bool")
