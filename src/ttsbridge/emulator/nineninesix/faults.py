"""Error catalog and fault injection of the emulator.

A :class:`Fault` makes the emulator misbehave on purpose on a matching request: answer with a catalog error,
drop the connection (no close frame), stall (stop sending, keep the socket open) or close it cleanly.
Tests add faults with ``emu.add_fault(...)``; clients that only control the text (Pipecat, LiveKit) can put
an in-band marker in a transcript instead: ``[[error:generation_failed]]``, ``[[drop:2]]``, ``[[stall]]``,
``[[close]]``.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ERROR_CATALOG",
    "FAULT_ACTIONS",
    "ErrorSpec",
    "Fault",
    "FaultBook",
    "error_spec",
    "parse_inband",
    "ws_close_code",
]

FaultAction = Literal["error", "drop", "stall", "close"]
FAULT_ACTIONS: tuple[str, ...] = ("error", "drop", "stall", "close")

DOC_URL = "https://docs.nineninesix.ai/api-reference/errors"


@dataclass(frozen=True)
class ErrorSpec:
    """One catalog entry.

    Attributes:
        code: the ``error_code`` of the WebSocket error frame.
        status: its ``status_code``.
        title: the frame's ``title``.
        message: default human-readable ``message``.
        closes: True if the server closes the WebSocket after the frame; False if only the context ends.
        http_status: HTTP status of the same failure on ``/tts/bytes`` / ``/tts/sse``.
        http_error: the ``error`` field of the HTTP JSON error body.
    """

    code: str
    status: int
    title: str
    message: str
    closes: bool
    http_status: int
    http_error: str


def _spec(
    code: str, status: int, title: str, message: str, closes: bool, http_status: int, http_error: str
) -> ErrorSpec:
    return ErrorSpec(code, status, title, message, closes, http_status, http_error)


#: Every error the emulator can send. The first eleven are the documented WebSocket catalog; the rest are the
#: HTTP-only codes and the emulator's own ``invalid_request`` / ``unauthorized``.
ERROR_CATALOG: dict[str, ErrorSpec] = {
    s.code: s
    for s in (
        _spec("unknown_model", 400, "Unknown model", "unknown model_id", True, 400, "unknown_model"),
        _spec(
            "concurrent_limit",
            429,
            "Concurrency limit reached",
            "too many concurrent contexts; retry the turn on a fresh context_id",
            False,
            429,
            "rate_limited",
        ),
        _spec(
            "insufficient_credits",
            402,
            "Insufficient credits",
            "insufficient credits",
            True,
            402,
            "payment_required",
        ),
        _spec("voice_not_found", 404, "Voice not found", "voice not found", True, 400, "voice_not_found"),
        _spec(
            "unsupported_container",
            400,
            "Unsupported container",
            "unsupported container",
            True,
            400,
            "invalid_output_format",
        ),
        _spec(
            "unsupported_encoding",
            400,
            "Unsupported encoding",
            "unsupported encoding",
            True,
            400,
            "invalid_output_format",
        ),
        _spec(
            "invalid_sample_rate",
            400,
            "Invalid sample rate",
            "unsupported sample_rate",
            True,
            400,
            "invalid_output_format",
        ),
        _spec(
            "generation_failed",
            500,
            "Generation failed",
            "synthesis backend error",
            False,
            502,
            "upstream_unavailable",
        ),
        _spec(
            "not_initialized",
            503,
            "Not initialized",
            "synthesis backend not initialized",
            True,
            502,
            "upstream_unavailable",
        ),
        _spec(
            "context_not_found",
            404,
            "Context not found",
            "no active context with this context_id",
            False,
            404,
            "context_not_found",
        ),
        _spec(
            "missing_context_id",
            400,
            "Missing context_id",
            "cancel needs a context_id",
            False,
            400,
            "missing_context_id",
        ),
        # HTTP-side codes (also usable in WebSocket faults: they end only the context).
        _spec(
            "rate_limited",
            429,
            "Rate limited",
            "requests/min limit exceeded for your tier",
            False,
            429,
            "rate_limited",
        ),
        _spec(
            "upstream_unavailable",
            502,
            "Upstream unavailable",
            "synthesis backend error",
            False,
            502,
            "upstream_unavailable",
        ),
        _spec("invalid_request", 400, "Invalid request", "malformed request", False, 400, "invalid_request"),
        _spec("unauthorized", 401, "Unauthorized", "invalid API key", True, 401, "unauthorized"),
    )
}


def error_spec(code: str) -> ErrorSpec:
    """The catalog entry of ``code``; an unknown code gets status 500 and ends only its context."""
    spec = ERROR_CATALOG.get(code)
    if spec is not None:
        return spec
    return ErrorSpec(code, 500, code.replace("_", " ").capitalize(), code, False, 502, code)


def ws_close_code(spec: ErrorSpec) -> int:
    """WebSocket close code after a socket-closing error: 1008 (policy violation) for 4xx, 1013 (try again
    later) for 503, 1011 (internal error) for other 5xx."""
    if spec.status == 503:
        return 1013
    if spec.status >= 500:
        return 1011
    return 1008


@dataclass
class Fault:
    """A deliberate failure.

    Attributes:
        trigger: substring of a transcript that arms the fault; None = the next TTS request (a WebSocket
            generation request with a non-empty transcript, or an HTTP ``/tts/bytes`` / ``/tts/sse`` request).
        action: ``error`` (send the catalog error ``error_code`` with its documented effect), ``drop`` (cut
            the TCP connection, no close frame), ``stall`` (send nothing more for that context / response,
            keep the socket open), ``close`` (clean close frame with ``close_code``, no error frame).
        error_code: catalog code for ``action="error"`` (default ``generation_failed``).
        after_chunks: fire after this many audio chunks of the matching transcript were sent (0 = before
            any audio). More than the transcript has: fires after its last chunk.
        times: how many requests it fires on; 0 = every matching request, forever.
        close_code: WebSocket close code for ``action="close"`` (default 1001, going away).
    """

    trigger: str | None = None
    action: FaultAction = "error"
    error_code: str | None = None
    after_chunks: int = 0
    times: int = 1
    close_code: int = 1001
    fired: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if self.action not in FAULT_ACTIONS:
            raise ValueError(f"invalid action={self.action!r}; allowed: {', '.join(FAULT_ACTIONS)}")
        if self.after_chunks < 0:
            raise ValueError(f"invalid after_chunks={self.after_chunks!r}; allowed: >= 0")
        if self.times < 0:
            raise ValueError(f"invalid times={self.times!r}; allowed: >= 0 (0 = always)")
        if self.action == "error" and self.error_code is None:
            self.error_code = "generation_failed"

    @property
    def spec(self) -> ErrorSpec:
        """The catalog entry of ``error_code`` (``generation_failed`` when unset)."""
        return error_spec(self.error_code or "generation_failed")

    @property
    def exhausted(self) -> bool:
        return self.times != 0 and self.fired >= self.times


class FaultBook:
    """The armed faults of one emulator, matched in the order they were added."""

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()

    def add(self, fault: Fault) -> Fault:
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def faults(self) -> list[Fault]:
        """The armed faults (a copy)."""
        with self._lock:
            return list(self._faults)

    def match(self, transcript: str) -> Fault | None:
        """Consume one firing of the first armed fault matching ``transcript``; None if none matches."""
        with self._lock:
            for fault in self._faults:
                if fault.exhausted:
                    continue
                if fault.trigger is None or fault.trigger in transcript:
                    fault.fired += 1
                    if fault.exhausted:
                        self._faults.remove(fault)
                    return fault
        return None


_INBAND = re.compile(
    r"\s*\[\[\s*(error|drop|stall|close)\s*(?::\s*([A-Za-z_0-9]+)\s*)?(?::\s*(\d+)\s*)?\]\]\s*"
)


def parse_inband(transcript: str) -> tuple[str, Fault | None]:
    """Strip in-band fault markers from ``transcript``; return the text to speak and the first marker's fault.

    Markers: ``[[error]]`` / ``[[error:CODE]]`` / ``[[error:CODE:N]]``, ``[[drop]]`` / ``[[drop:N]]``,
    ``[[stall]]`` / ``[[stall:N]]``, ``[[close]]`` / ``[[close:N]]`` (N = after_chunks). A marker and the
    whitespace around it become one space.
    """
    fault: Fault | None = None

    def _take(m: re.Match[str]) -> str:
        nonlocal fault
        if fault is None:
            action, arg, num = m.group(1), m.group(2), m.group(3)
            if action == "error":
                if arg is not None and arg.isdigit() and num is None:
                    arg, num = None, arg
                code = arg or "generation_failed"
                fault = Fault(action="error", error_code=code, after_chunks=int(num or 0))
            else:
                n = num if num is not None else (arg if arg is not None and arg.isdigit() else "0")
                fault = Fault(action=action, after_chunks=int(n))  # type: ignore[arg-type]
        return " "

    text = _INBAND.sub(_take, transcript)
    if fault is None:
        return transcript, None
    return text, fault
