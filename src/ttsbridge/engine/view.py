"""The read side of :class:`~ttsbridge.engine.turn.EngineTurn`: every fact a :class:`~ttsbridge.turns.Turn`
answers, read off the current attempt's protocol and its record of the turn (never a copy); the turn itself
knows only what spans its attempts (cancelled, iteration over, the error it raised, its end as dispatched)."""

from __future__ import annotations

from ttsbridge.engine.events import TurnEvent
from ttsbridge.engine.link import Link
from ttsbridge.engine.protocol import TurnFacts, TurnProtocol
from ttsbridge.errors import TTSBridgeError
from ttsbridge.policy.usage import TurnUsage
from ttsbridge.turns import Turn, TurnOutcome

__all__ = ["TurnView"]


class TurnView(Turn):
    """Base of :class:`~ttsbridge.engine.turn.EngineTurn`: its facts."""

    _id: str
    _link: Link | None
    _facts: TurnFacts | None
    _end: TurnEvent | None
    _error: TTSBridgeError | None
    _cancelled: bool
    _done: bool
    _reused: bool

    @property
    def id(self) -> str:
        return self._id

    @property
    def link(self) -> Link | None:
        """The current attempt's link (tests, providers' bookkeeping)."""
        return self._link

    @property
    def protocol(self) -> TurnProtocol | None:
        return self._link.protocol if self._link is not None else None

    @property
    def facts(self) -> TurnFacts | None:
        return self._facts

    @property
    def retries(self) -> int:
        return self._facts.retries if self._facts is not None else 0

    @property
    def characters_sent(self) -> int:
        return self._facts.characters_sent if self._facts is not None else 0

    @property
    def audio_started(self) -> bool:
        return bool(self._facts is not None and self._facts.audio_bytes)

    @property
    def connection_reused(self) -> bool:
        return self._reused

    @property
    def done(self) -> bool:
        return self._done

    @property
    def settled(self) -> bool:
        """Over in the protocol (its end dispatched, perhaps not consumed yet), or cancelled."""
        return self._end is not None or self._cancelled

    @property
    def outcome(self) -> TurnOutcome | None:
        if self.error is not None:
            return "failed"
        if self._cancelled:
            return "cancelled"
        return "done" if self._done else None

    @property
    def error(self) -> TTSBridgeError | None:
        """What the iteration raised; None while the turn runs, and for a completed or cancelled turn."""
        return None if self._cancelled or not self._done else self._error

    @property
    def usage(self) -> TurnUsage:
        proto = self.protocol
        usage = proto.usage(self._facts, self) if proto is not None else None
        return usage if usage is not None else super().usage

    @property
    def wire_format(self) -> str:
        proto = self.protocol
        return proto.wire_format() if proto is not None else ""

    @property  # type: ignore[override]
    def reports_send_ends(self) -> bool:
        proto = self.protocol
        return proto.reports_send_ends if proto is not None else False

    @property
    def rendered(self) -> list[tuple[int, float]]:
        proto = self.protocol
        return proto.rendered(self._facts) if proto is not None else []
