"""OpenTelemetry attributes of one ttsbridge turn, written on the framework's own TTS span.

The adapters do not open spans of their own: Pipecat's ``traced_tts`` opens one ``tts`` span per audio
context, LiveKit's base classes open ``tts_request`` / ``tts_request_run``. A :class:`TurnRecord` collects what
the adapter sees of a turn (the :class:`~ttsbridge.turns.Turn` itself, its time to first audio, how the
adapter ended it) and :meth:`TurnRecord.apply` writes it on that span under the framework's attribute names
where it has one, and ``ttsbridge.*`` names where it has none (:data:`PIPECAT_NAMES`, :data:`LIVEKIT_NAMES`).

Provider-neutral, and needs only ``opentelemetry-api``; without it (or with no tracer provider set, when
spans do not record) everything here does nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ttsbridge.turns import Turn, TurnOutcome, TurnProvider, error_code

try:  # opentelemetry-api is optional: Pipecat and LiveKit pull it in
    from opentelemetry import trace as _trace
    from opentelemetry.trace import Status, StatusCode
except ImportError:  # pragma: no cover - exercised only without opentelemetry
    _trace = None  # type: ignore[assignment]

__all__ = [
    "DEFAULT_NAMES",
    "ERROR_TYPE",
    "FACTS",
    "LIVEKIT_NAMES",
    "PIPECAT_NAMES",
    "TurnRecord",
    "current_span",
]

#: The facts recorded per turn, in the order the docs list them.
FACTS = (
    "provider",
    "model",
    "voice",
    "request_id",
    "wire_format",
    "characters_sent",
    "ttfa",
    "retries",
    "connection_reused",
    "outcome",
    "error_code",
    "cache",
)

#: OpenTelemetry's general ``error.type`` attribute: the error code of a failed turn.
ERROR_TYPE = "error.type"

#: fact -> attribute name: ``ttsbridge.<fact>``. ``ttsbridge.ttfa`` is in seconds. ``error_type`` is where a
#: failed turn's code also goes (OTel's ``error.type``).
DEFAULT_NAMES: Mapping[str, str | None] = {
    **{fact: f"ttsbridge.{fact}" for fact in FACTS},
    "error_type": ERROR_TYPE,
}

#: Pipecat's names (``add_tts_span_attributes``) where it has one. Pipecat's own ``metrics.ttfb`` (set from
#: its TTFB metric when metrics are enabled) and ``metrics.character_count`` are left as Pipecat sets them.
PIPECAT_NAMES: Mapping[str, str | None] = {
    **DEFAULT_NAMES,
    "provider": "gen_ai.provider.name",
    "model": "gen_ai.request.model",
    "voice": "voice_id",
}

#: LiveKit's names (``livekit.agents.telemetry.trace_types``) where it has one. ``gen_ai.provider.name`` is
#: set by LiveKit itself from ``tts.provider`` (None: not written); the provider's id of the turn also goes to
#: ``lk.provider_request_ids`` through ``AudioEmitter.start_segment``; ``lk.retry_count`` is LiveKit's own
#: attempt number, so the provider's retries inside one attempt stay ``ttsbridge.retries``. ``error.type`` is
#: LiveKit's too (from the exception that leaves ``_run``: the HTTP-like status of an ``APIStatusError``).
LIVEKIT_NAMES: Mapping[str, str | None] = {
    **DEFAULT_NAMES,
    "provider": None,
    "error_type": None,
    "model": "gen_ai.request.model",
    "request_id": "gen_ai.response.id",
    "ttfa": "gen_ai.response.time_to_first_chunk",
}


def current_span() -> Any:
    """The current OpenTelemetry span (a non-recording one when none is active), or None without OTel."""
    return _trace.get_current_span() if _trace is not None else None


class TurnRecord:
    """What an adapter knows of one turn (or one one-shot synthesis, or a run of them in one audio context).

    Args:
        provider: the provider the turn is opened on (its name, and :meth:`TurnProvider.describe`).
        sample_rate: the rate the turn is opened with (the wire format follows it).
        overrides: the per-turn option overrides passed to ``open_turn`` / ``synthesize``.
        clock: monotonic seconds (tests may pass their own).
    """

    def __init__(
        self,
        provider: TurnProvider,
        *,
        sample_rate: int,
        overrides: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.provider_name = provider.provider
        try:
            self._described = provider.describe(sample_rate=sample_rate, **dict(overrides or {}))
        except Exception:  # a bad override fails the turn itself; tracing never does
            self._described = {}
        self._clock = clock
        self._started = clock()
        self.turn: Turn | None = None
        #: Seconds from the record's creation (the turn's first text) to its first audio.
        self.ttfa: float | None = None
        #: Characters sent without a Turn (one-shot synthesis); a bound turn counts its own.
        self.characters = 0
        self._error: BaseException | None = None
        self._cancelled = False
        self._completed = False
        #: ``"hit"`` / ``"miss"`` for a one-shot synthesis that went through the phrase cache (a bound turn
        #: says it itself: ``Turn.cache``); None otherwise.
        self.cache: str | None = None

    def bind(self, turn: Turn) -> None:
        self.turn = turn

    def on_audio(self) -> None:
        """Audio of the turn reached the framework (the first call fixes the TTFA)."""
        if self.ttfa is None:
            self.ttfa = self._clock() - self._started

    def add_characters(self, n: int) -> None:
        self.characters += n

    def completed(self) -> None:
        """A turnless synthesis delivered all its audio."""
        self._completed = True

    def cancelled(self) -> None:
        """The adapter cancelled the turn (barge-in)."""
        self._cancelled = True

    def failed(self, exc: BaseException) -> None:
        """The adapter saw the turn fail with ``exc`` (the first failure wins)."""
        if self._error is None:
            self._error = exc

    @property
    def outcome(self) -> tuple[TurnOutcome | None, str | None]:
        """``(outcome, error code)``: what the adapter saw fail wins, then what the turn says, then the
        adapter's cancel; None while the turn runs."""
        if self._error is not None:
            return "failed", error_code(self._error)
        turn = self.turn
        if turn is not None and turn.outcome is not None:
            return turn.outcome, turn.error_code
        if self._cancelled:
            return "cancelled", None
        return ("done", None) if self._completed else (None, None)

    def _characters_sent(self) -> int:
        """Of a record with no bound turn (a one-shot): what it added, or 0 when the phrase cache served it."""
        return 0 if self.cache == "hit" else self.characters

    def facts(self) -> dict[str, str | int | float | bool]:
        """The facts known now, keyed as in :data:`FACTS` (unknown ones left out)."""
        turn = self.turn
        outcome, code = self.outcome
        out: dict[str, Any] = {
            "provider": self.provider_name,
            "model": self._described.get("model"),
            "voice": self._described.get("voice"),
            "request_id": turn.id if turn is not None else None,
            "wire_format": (turn.wire_format if turn is not None else "")
            or self._described.get("wire_format"),
            "characters_sent": turn.characters_sent if turn is not None else self._characters_sent(),
            "ttfa": self.ttfa,
            "retries": turn.retries if turn is not None else 0,
            "connection_reused": turn.connection_reused if turn is not None else None,
            "outcome": outcome,
            "error_code": code,
            "cache": getattr(turn, "cache", None) or self.cache,  # the phrase cache: "hit" or "miss"
        }
        return {k: v for k, v in out.items() if v is not None and v != ""}

    def apply(self, span: Any, names: Mapping[str, str | None] = DEFAULT_NAMES) -> None:
        """Write the facts on ``span`` (a no-op for None or a span that no longer records). Call it at every
        point where the span may end; later calls overwrite earlier values."""
        if _trace is None or span is None or not span.is_recording():
            return
        attrs = {names[k]: v for k, v in self.facts().items() if names.get(k)}
        outcome, code = self.outcome
        error_type = names.get("error_type")
        if outcome == "failed" and code and error_type:
            attrs[error_type] = code
        span.set_attributes(attrs)
        if outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, code))
