"""Kitta fault specs: ``[[kitta:SPEC]]`` markers and ``KittaConfig.session_faults`` (see the package docs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ttsbridge.emulator.kitta.config import CLOSE_INTERNAL

__all__ = ["KittaFault", "parse_kitta_fault"]


@dataclass(frozen=True)
class KittaFault:
    """A parsed fault spec (see module docs)."""

    spec: str
    action: str  # error | close | stall | delay
    code: str = "internal_error"
    close_code: int = CLOSE_INTERNAL
    retryable: bool = False
    after_audio: bool = False
    times: int | None = None
    delay_s: float = 0.0
    at: str = "flush"  # flush | start


def parse_kitta_fault(spec: str) -> KittaFault:
    """Parse ``error=CODE[:retryable][:after_audio][:times=N]``, ``close=CODE[...]``, ``error_after_audio``,
    ``stall``, ``delay=SECONDS`` (both before the segment's audio: no ``after_audio``). Raises ValueError on
    anything else."""
    parts = [p.strip() for p in spec.strip().split(":") if p.strip()]
    if not parts:
        raise ValueError("empty fault spec")
    head, _, value = parts[0].partition("=")
    kw: dict[str, Any] = {"spec": spec}
    if head == "error_after_audio":
        kw.update(action="error", code="internal_error", retryable=True, after_audio=True)
    elif head == "error":
        if not value:
            raise ValueError("error=CODE needs a code")
        kw.update(action="error", code=value)
    elif head == "close":
        code = int(value) if value else CLOSE_INTERNAL
        if not (code == 1000 or 1001 <= code <= 1014 or 3000 <= code <= 4999) or code in (1004, 1005, 1006):
            raise ValueError(f"close code {code} cannot be sent")
        kw.update(action="close", close_code=code)
    elif head == "stall":
        kw.update(action="stall")
    elif head == "delay":
        kw.update(action="delay", delay_s=float(value or "1"))
    else:
        raise ValueError(f"unknown fault action {head!r}")
    for flag in parts[1:]:
        name, _, val = flag.partition("=")
        if name == "retryable":
            kw["retryable"] = True
        elif name == "after_audio":
            kw["after_audio"] = True
        elif name == "times":
            kw["times"] = int(val)
        elif name == "at":
            if val not in ("flush", "start"):
                raise ValueError(f"at={val!r}: allowed flush, start")
            kw["at"] = val
        else:
            raise ValueError(f"unknown fault flag {name!r}")
    if kw.get("after_audio") and kw["action"] in ("stall", "delay"):
        raise ValueError(f"{head} happens before the segment's audio: after_audio is not allowed")
    return KittaFault(**kw)
