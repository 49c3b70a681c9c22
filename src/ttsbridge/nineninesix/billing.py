"""Nineninesix's billing rule (:data:`NINENINESIX`), as data for :mod:`ttsbridge.policy.usage`.

Every transcript is a unit billed when it arrives (1 credit per character of the transcript; the server trims
it), confirmed on ``done``, refunded when the server ends it with an ``error`` (an error frame, or a
socket-closing catalog error; HTTP: 502 "pre-charge refunded"). Cancelled text stays billed ("all text sent
for the context is billed"), and so does text of a turn the client gave up on (its own timeout, a dropped
socket): no page promises a refund for those.
"""

from __future__ import annotations

from types import MappingProxyType

from ttsbridge.policy.usage import FAILED_BY_SERVER, FAILED_LOCALLY, Billed, BillingRule

__all__ = ["NINENINESIX"]

NINENINESIX = BillingRule(
    provider="nineninesix",
    unit_per_send=True,
    open=Billed.ALL,
    ended=MappingProxyType(
        {
            "done": Billed.ALL,
            "cancelled": Billed.ALL,
            FAILED_BY_SERVER: Billed.NONE,
            FAILED_LOCALLY: Billed.ALL,
        }
    ),
)
