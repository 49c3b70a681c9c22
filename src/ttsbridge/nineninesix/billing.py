"""Nineninesix's billing rule (:data:`NINENINESIX`), as data for :mod:`ttsbridge.policy.usage`.

Every transcript is a unit billed when it arrives (1 credit per character of the transcript; the server trims
it), confirmed on ``done``, refunded when the server ends it with an ``error`` (an error frame, or a
socket-closing catalog error; HTTP: 502 "pre-charge refunded"). Cancelled text stays billed ("all text sent
for the context is billed"), and so does text of a turn the client gave up on (its own timeout, a dropped
socket): no page promises a refund for those.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import TYPE_CHECKING

from ttsbridge.errors import TTSAPIError
from ttsbridge.policy.usage import (
    FAILED_BY_SERVER,
    FAILED_LOCALLY,
    Billed,
    BillingRule,
    TurnUsage,
    UsageMeter,
)

if TYPE_CHECKING:
    from ttsbridge.nineninesix.facts import ContextFacts
    from ttsbridge.turns import Turn

__all__ = ["NINENINESIX", "turn_usage"]

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


def turn_usage(facts: ContextFacts | None, turn: Turn, wire_rate: int) -> TurnUsage:
    """:data:`NINENINESIX` over the current context's facts: every transcript of the turn is billed, also when
    cancelled; refunded when the server ends the turn with an error. An earlier context was retried only when
    the server billed nothing of it."""
    meter = UsageMeter(NINENINESIX, turn_id=turn.id)
    if facts is not None:
        for text in facts.texts:
            meter.send(text)
        meter.audio(facts.audio_bytes / (2 * wire_rate))
    meter.settle(turn.outcome, turn.error_code, by_server=isinstance(turn.error, TTSAPIError))
    meter.heard(turn.characters_heard)
    return dataclasses.replace(meter.usage, retries=turn.retries, characters_written=turn.characters_written)
