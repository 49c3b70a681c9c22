"""Kitta's billing rule, written once: :data:`KITTA` (the table) and :func:`session_units` (a session's units
as the protocol records them); :meth:`KittaProtocol.usage <ttsbridge.kitta.protocol.KittaProtocol.usage>` applies the one to the other.

Text accumulates until a flush; each non-empty flushed segment is a unit, reserved at the flush, committed
(billed) at its first audio frame, refunded if the session ends before any of its audio (failure, cancel,
the client leaving). A finished session has committed every segment. Units are characters of the segment
without leading/trailing whitespace (docs/kitta.md: the page does not define them); the server's ``usage``
count of a segment, and its ``finish`` count of the session, replace the estimate.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MappingProxyType
from typing import TYPE_CHECKING

from ttsbridge.errors import TTSAPIError
from ttsbridge.kitta.segments import Segment, SegmentStatus
from ttsbridge.policy.usage import (
    FAILED_BY_SERVER,
    FAILED_LOCALLY,
    Billed,
    BillingRule,
    BillingUnit,
    TurnEnd,
    TurnUsage,
)

if TYPE_CHECKING:
    from ttsbridge.kitta.facts import TurnFacts
    from ttsbridge.turns import Turn

__all__ = ["KITTA", "session_units", "turn_usage"]

KITTA = BillingRule(
    provider="kitta",
    unit_per_send=False,
    open=Billed.AUDIO,
    ended=MappingProxyType(
        {
            "done": Billed.ALL,
            "cancelled": Billed.AUDIO,
            FAILED_BY_SERVER: Billed.AUDIO,
            FAILED_LOCALLY: Billed.AUDIO,
        }
    ),
)


def session_units(segments: Iterable[Segment], finish_units: int | None) -> list[BillingUnit]:
    """One session's units for :data:`KITTA`: one per flushed segment (the server's ``usage`` units when it
    sent them, else its characters without surrounding whitespace), with audio once its first audio frame
    arrived (``delivering``/``done``); a finished session is the one unit of its ``finish`` count."""
    if finish_units is not None:
        return [BillingUnit(finish_units, audio=True, done=True)]
    return [
        BillingUnit(
            seg.units if seg.units is not None else len(seg.text.strip()),
            audio=seg.status is not SegmentStatus.PENDING,
            done=seg.status is SegmentStatus.DONE,
        )
        for seg in segments
    ]


def turn_usage(
    segments: Iterable[Segment], finish_units: int | None, rate: int | None, facts: TurnFacts, turn: Turn
) -> TurnUsage:
    """:data:`KITTA` over the current session's units (:func:`session_units`: its segments and their
    statuses, or its ``finish`` count). Earlier (retried) sessions add the units their ``usage`` events
    reported (a retry never follows a part-delivered segment)."""
    earlier = facts.units - (finish_units or 0)  # the facts add this session's finish units too
    units = session_units(segments, finish_units)
    ended = turn.outcome
    basis = KITTA.basis(ended, by_server=isinstance(turn.error, TTSAPIError))
    return TurnUsage(
        provider=KITTA.provider,
        turn_id=turn.id,
        characters_sent=facts.characters_sent,
        characters_billed=earlier + KITTA.billed(units, basis),
        characters_heard=turn.characters_heard,
        audio_seconds=facts.audio_bytes / 2 / rate if rate else 0.0,
        ended=None if ended is None else TurnEnd(ended),
        error_code=turn.error_code,
        characters_reserved=0 if ended is not None else KITTA.reserved(units, basis),
        retries=facts.retries,
        characters_written=turn.characters_written,
    )
