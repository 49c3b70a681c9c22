"""Pipecat's TOKEN-mode text aggregator, coalescing streamed tokens into clauses.

In ``TextAggregationMode.TOKEN`` Pipecat's own aggregator hands every LLM token on at once, and the
service's text filters and ``text_transforms`` then run on each token: "4" and "2" are rewritten one digit at
a time, a URL is never seen whole. :class:`ClauseTokenAggregator` takes that aggregator's place: it holds
tokens until a clause ends (:class:`ttsbridge.policy.coalesce.TokenCoalescer`) and releases the clause as one
``TOKEN`` aggregation, so everything Pipecat does after aggregation (filters, transforms, the sequencer that
puts the spoken words in the LLM context, ``run_tts``) sees whole clauses. The aggregation type stays
``TextType.TOKEN``: the mode is still TOKEN (no sentence lookahead, the text's own spacing, transforms
registered for ``"token"`` or ``"*"`` apply), only the unit is larger.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from pipecat.utils.text.base_text_aggregator import Aggregation, BaseTextAggregator, TextType

from ttsbridge.policy.coalesce import TokenCoalescer

__all__ = ["ClauseTokenAggregator"]


class ClauseTokenAggregator(BaseTextAggregator):
    """A TOKEN-mode aggregator that releases clauses; the rest of the response at :meth:`flush`."""

    def __init__(self, *, language: str | None = None, max_chars: int = 80) -> None:
        super().__init__(aggregation_type=TextType.TOKEN, language=language)
        self._max_chars = max_chars
        self._coalescer = TokenCoalescer(max_chars)

    @property
    def text(self) -> Aggregation:
        """The text held back so far (not yet a clause)."""
        return Aggregation(text=self._coalescer.buffered, type=TextType.TOKEN)

    async def aggregate(self, text: str) -> AsyncIterator[Aggregation]:
        clause = self._coalescer.push(text)
        if clause:
            yield Aggregation(text=clause, type=TextType.TOKEN)

    async def flush(self) -> Aggregation | None:
        """The end of the LLM response: everything held back."""
        rest = self._coalescer.flush()
        return Aggregation(text=rest, type=TextType.TOKEN) if rest else None

    async def handle_interruption(self) -> None:
        """Barge-in: the text held back belongs to a reply that is not spoken any more."""
        await self.reset()

    async def reset(self) -> None:
        self._coalescer = TokenCoalescer(self._max_chars)
