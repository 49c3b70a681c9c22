"""Turn policy written once, provider- and framework-neutral, pure (no I/O, no clock of its own).

- :mod:`~ttsbridge.policy.words`: the word-timing estimator both adapters use (:class:`WordClock`).
- :mod:`~ttsbridge.policy.coalesce`: streamed LLM tokens coalesced into clauses (:class:`TokenCoalescer`).
- :mod:`~ttsbridge.policy.usage`: a per-turn usage ledger with each provider's billing rules.
"""

from __future__ import annotations

from ttsbridge.policy.coalesce import TokenCoalescer
from ttsbridge.policy.usage import TurnUsage, UsageMeter, UsageTotals
from ttsbridge.policy.words import (
    DEFAULT_CHARS_PER_SECOND,
    SpeechRate,
    TimedWord,
    WordClock,
)

__all__ = [
    "DEFAULT_CHARS_PER_SECOND",
    "SpeechRate",
    "TimedWord",
    "TokenCoalescer",
    "TurnUsage",
    "UsageMeter",
    "UsageTotals",
    "WordClock",
]
