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

from ttsbridge.kitta.segments import Segment, SegmentStatus
from ttsbridge.policy.usage import FAILED_BY_SERVER, FAILED_LOCALLY, Billed, BillingRule, BillingUnit

__all__ = ["KITTA", "session_units"]

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
