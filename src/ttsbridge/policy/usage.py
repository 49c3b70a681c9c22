"""A per-turn usage ledger: what was sent, what the provider bills for it, what the user heard. Pure.

Cost is what operators ask about, and providers bill differently.

Each provider's rule is a :class:`BillingRule` in its own package (``ttsbridge/<provider>/billing.py``),
found by name through the provider registry (:func:`ttsbridge.providers.billing_rule`); this module only
applies rules. A rule says what a unit is (every send, or the text between flushes) and which units are
billed while the turn is open and once it ended (all, those whose first audio arrived, none); a server's
count of a unit replaces the estimate (characters without leading/trailing whitespace).

How it is meant to be fed (one :class:`UsageMeter` per :class:`~ttsbridge.turns.Turn`, owned by whatever
holds the turn's state, i.e. the provider's protocol object; ``Turn.usage`` then returns ``meter.usage``, a
frozen snapshot, cheaply at any time):

* :meth:`~UsageMeter.send` with every text put on the wire (a Nineninesix transcript, a Kitta ``text``),
  :meth:`~UsageMeter.flush` at every Kitta flush (and at ``stop``, which flushes the rest);
* :meth:`~UsageMeter.audio` with the seconds of every audio chunk delivered, :meth:`~UsageMeter.unit_done`
  when the server reports a unit complete (Kitta ``usage``, with its ``units``);
* :meth:`~UsageMeter.heard` from the adapter, with the characters of the words its word clock released
  (``len(TimedWord.text)``, the LLM's own words: a turn heard to the end has heard every character written,
  ``characters_written``; what was sent and billed is the spoken form, docs/text.md);
* exactly one ending: :meth:`~UsageMeter.done`, :meth:`~UsageMeter.cancelled` or :meth:`~UsageMeter.failed`
  (``by_server=True`` when the server reported the error, i.e. a ``TTSAPIError``); the first one wins;
* :meth:`~UsageMeter.retry` when the provider retries the turn on a fresh context/session: the failed attempt
  is settled by the failure rule and the replayed text is sent (and counted) again.

:class:`UsageTotals` sums finished turns for the end-of-run report of ``ttsbridge say`` / ``ttsbridge demo``.

Where it is fed today (``Turn.usage``): Nineninesix builds a meter at each snapshot from the current context's
facts (the protocol's record of the turn's texts and audio) and the turn's outcome (:meth:`UsageMeter.settle`);
Kitta applies its rule (:meth:`BillingRule.billed`) to the units its session protocol records (the segments and
their statuses: ``kitta/billing.py``); the adapters add the characters heard through ``Turn.note_heard``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = [
    "FAILED_BY_SERVER",
    "FAILED_LOCALLY",
    "Billed",
    "BillingRule",
    "BillingUnit",
    "TurnEnd",
    "TurnUsage",
    "UsageMeter",
    "UsageTotals",
]


class TurnEnd(str, enum.Enum):
    DONE = "done"
    CANCELLED = "cancelled"
    FAILED = "failed"


class Billed(str, enum.Enum):
    """Which units of a turn are billed."""

    ALL = "all"  # every unit sent
    AUDIO = "audio"  # units whose first audio arrived (or that the server reported complete)
    NONE = "none"  # none: refunded


#: Ending keys of a rule's table: a failure counts as the server's when it reported it.
FAILED_BY_SERVER = "failed_by_server"
FAILED_LOCALLY = "failed_locally"


@dataclass
class BillingUnit:
    """One billable unit of a turn: its characters (the server's count once it reported one), whether its
    first audio arrived, whether the server reported it complete."""

    chars: int
    audio: bool = False
    done: bool = False


@dataclass(frozen=True)
class BillingRule:
    """A provider's billing rules, as data: what a unit is, and which units are billed at each stage."""

    provider: str
    #: True: every :meth:`UsageMeter.send` is a unit; False: text accumulates until :meth:`UsageMeter.flush`.
    unit_per_send: bool
    #: Billed while the turn is open.
    open: Billed
    #: Billed once it ended: keys ``done``, ``cancelled``, ``failed_by_server``, ``failed_locally``.
    ended: Mapping[str, Billed]

    def basis(self, outcome: str | None, *, by_server: bool = False) -> Billed:
        """Which units are billed for a turn's ``outcome`` as :class:`~ttsbridge.turns.Turn` reports it
        (``"done"``, ``"cancelled"``, ``"failed"``; None: still open). ``by_server``: the server reported the
        failure."""
        if outcome is None:
            return self.open
        if outcome == "failed":
            return self.ended[FAILED_BY_SERVER if by_server else FAILED_LOCALLY]
        return self.ended[outcome]

    @staticmethod
    def billed(units: Iterable[BillingUnit], basis: Billed) -> int:
        """Characters of ``units`` billed on ``basis``."""
        if basis is Billed.ALL:
            return sum(u.chars for u in units)
        if basis is Billed.AUDIO:
            return sum(u.chars for u in units if u.audio or u.done)
        return 0

    @classmethod
    def reserved(cls, units: Iterable[BillingUnit], basis: Billed) -> int:
        """Characters of ``units`` sent but not (yet) billed on ``basis``: while a turn is open, those waiting
        for their first audio."""
        listed = list(units)
        return max(sum(u.chars for u in listed) - cls.billed(listed, basis), 0)


@dataclass(frozen=True)
class TurnUsage:
    """The usage of one turn (a snapshot: a turn still open has ``ended=None``)."""

    provider: str
    turn_id: str
    characters_sent: int = 0
    characters_billed: int = 0
    characters_heard: int = 0
    audio_seconds: float = 0.0
    ended: TurnEnd | None = None
    error_code: str | None = None
    #: Units reserved but not yet billed or refunded (Kitta segments waiting for their first audio).
    characters_reserved: int = 0
    retries: int = 0
    #: Characters served from the phrase cache (:mod:`ttsbridge.cache`): sent to no server, billed 0.
    characters_cached: int = 0
    #: Characters of the LLM's own text whose spoken form was sent (``characters_sent`` counts the spoken form,
    #: which is what providers bill: docs/text.md); equal to ``characters_sent`` without a normalizer.
    characters_written: int = 0


@dataclass
class UsageMeter:
    """Accumulates the usage of one turn from the events of its life (see the module docstring)."""

    rule: BillingRule
    turn_id: str = ""
    _units: list[BillingUnit] = field(default_factory=list, init=False)
    _settled: int = field(default=0, init=False)  # billed characters of earlier (retried) attempts
    _buffer_text: str = field(default="", init=False)  # Kitta: text since the last flush
    _sent: int = field(default=0, init=False)
    _heard: int = field(default=0, init=False)
    _audio_s: float = field(default=0.0, init=False)
    _ended: TurnEnd | None = field(default=None, init=False)
    _ending_key: str | None = field(default=None, init=False)
    _error_code: str | None = field(default=None, init=False)
    _retries: int = field(default=0, init=False)

    # -- events

    def send(self, text: str) -> None:
        self._sent += len(text)
        if self.rule.unit_per_send:
            self._add_unit(text)
        else:
            self._buffer_text += text

    def flush(self) -> None:
        if not self.rule.unit_per_send:
            self._add_unit(self._buffer_text)
            self._buffer_text = ""

    def audio(self, seconds: float) -> None:
        if seconds <= 0:
            return
        self._audio_s += seconds
        head = self._head()
        if head is not None:
            head.audio = True

    def unit_done(self, units: int | None = None) -> None:
        """The server reports the oldest open unit complete (Kitta ``usage``); ``units`` is its count."""
        head = self._head()
        if head is not None:
            head.done = True
            if units is not None:
                head.chars = units

    def heard(self, chars: int) -> None:
        self._heard += max(chars, 0)

    def done(self) -> None:
        self._end(TurnEnd.DONE, "done")

    def cancelled(self) -> None:
        self._end(TurnEnd.CANCELLED, "cancelled")

    def failed(self, code: str | None, *, by_server: bool) -> None:
        if self._end(TurnEnd.FAILED, FAILED_BY_SERVER if by_server else FAILED_LOCALLY):
            self._error_code = code

    def settle(self, outcome: str | None, code: str | None = None, *, by_server: bool = False) -> None:
        """Apply a turn's ending as :class:`~ttsbridge.turns.Turn` reports it (``"done"``, ``"cancelled"``,
        ``"failed"``; None: still running, nothing happens). The first ending wins, so it may be called on
        every snapshot."""
        if outcome == "done":
            self.done()
        elif outcome == "cancelled":
            self.cancelled()
        elif outcome == "failed":
            self.failed(code, by_server=by_server)

    def retry(self, *, by_server: bool) -> None:
        """The attempt failed and the provider retries on a fresh context/session: settle its units."""
        if self._ended is not None:
            return
        self._settled += self._billed(self.rule.ended[FAILED_BY_SERVER if by_server else FAILED_LOCALLY])
        self._units.clear()
        self._retries += 1

    # -- the snapshot

    @property
    def usage(self) -> TurnUsage:
        basis = self.rule.open if self._ending_key is None else self.rule.ended[self._ending_key]
        billed = self._settled + self._billed(basis)
        reserved = 0 if self._ended is not None else self.rule.reserved(self._units, basis)
        return TurnUsage(
            provider=self.rule.provider,
            turn_id=self.turn_id,
            characters_sent=self._sent,
            characters_billed=billed,
            characters_heard=self._heard,
            audio_seconds=self._audio_s,
            ended=self._ended,
            error_code=self._error_code,
            characters_reserved=reserved,
            retries=self._retries,
        )

    # -- internals

    def _add_unit(self, text: str) -> None:
        chars = len(text.strip())
        if chars and self._ended is None:
            self._units.append(BillingUnit(chars))

    def _head(self) -> BillingUnit | None:
        return next((u for u in self._units if not u.done), None)

    def _billed(self, basis: Billed) -> int:
        return self.rule.billed(self._units, basis)

    def _end(self, end: TurnEnd, key: str) -> bool:
        if self._ended is not None:
            return False
        self._ended, self._ending_key = end, key
        return True


@dataclass
class UsageTotals:
    """Totals over finished turns (for an end-of-run report)."""

    turns: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    characters_sent: int = 0
    characters_billed: int = 0
    characters_heard: int = 0
    audio_seconds: float = 0.0
    characters_cached: int = 0
    characters_written: int = 0

    @classmethod
    def of(cls, usages: Iterable[TurnUsage]) -> UsageTotals:
        totals = cls()
        for usage in usages:
            totals.add(usage)
        return totals

    def add(self, usage: TurnUsage) -> None:
        self.turns += 1
        key = usage.ended.value if usage.ended is not None else "open"
        if usage.ended is TurnEnd.FAILED and usage.error_code:
            key = f"failed:{usage.error_code}"
        self.outcomes[key] = self.outcomes.get(key, 0) + 1
        self.characters_sent += usage.characters_sent
        self.characters_billed += usage.characters_billed
        self.characters_heard += usage.characters_heard
        self.audio_seconds += usage.audio_seconds
        self.characters_cached += usage.characters_cached
        self.characters_written += usage.characters_written

    def report(self) -> str:
        """One line: ``3 turns (done 2, cancelled 1): 120 characters sent, 118 billed, 80 heard; 7.4 s``."""
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"{self.turns} turn{'s' if self.turns != 1 else ''}"
            + (f" ({outcomes})" if outcomes else "")
            + f": {self.characters_sent} characters sent, {self.characters_billed} billed,"
            + f" {self.characters_heard} heard"
            + (f", {self.characters_cached} from the phrase cache" if self.characters_cached else "")
            + f"; {self.audio_seconds:.1f} s of audio"
        )
