"""A provider's ``synthesize(text)`` through the phrase cache: :class:`PhraseSynthesis` (what
:meth:`CachedProvider.synthesize <ttsbridge.cache.CachedProvider.synthesize>` returns)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from ttsbridge.cache.store import PhraseStore
from ttsbridge.cache.turn import CachedTurn
from ttsbridge.policy.usage import TurnUsage
from ttsbridge.turns import Synthesis, TurnProvider

__all__ = ["PhraseSynthesis"]


class PhraseSynthesis(Synthesis):
    """``provider.synthesize(text)`` (``provider``: the live one) through the cache: a
    :class:`~ttsbridge.turns.Synthesis` (its ``take_received`` is the live synthesis' on a miss, so a caller that gives a miss up after audio loses
    none of it). ``cache`` says ``"hit"`` or ``"miss"`` once the first chunk was asked for (None: the provider
    cannot be cached); ``usage`` is the hit's (nothing billed), None for a miss."""

    def __init__(
        self,
        cache: PhraseStore,
        provider: TurnProvider,
        text: str,
        sample_rate: int,
        overrides: dict[str, Any],
    ) -> None:
        self._cache, self._provider, self._text = cache, provider, text
        self._rate, self._overrides = sample_rate, overrides
        self.cache: str | None = None
        self._turn: CachedTurn | None = None
        super().__init__(lambda synthesis: self._run())

    @property
    def usage(self) -> TurnUsage | None:
        return self._turn.usage if self._turn is not None else None

    async def aclose(self) -> None:
        """Given up (or over): a hit left before its end is a cancelled turn (its usage says so)."""
        if self._turn is not None and not self._turn.done:
            await self._turn.cancel()
        await super().aclose()

    @contextlib.asynccontextmanager
    async def _live(self) -> AsyncIterator[Synthesis]:
        """The live synthesis, closed with this one (its response released at once, not when collected)."""
        live = self._provider.synthesize(self._text, sample_rate=self._rate, **self._overrides)
        self.hold(live.take_received)  # given up mid-way: what the live synthesis holds
        try:
            yield live
        finally:
            await live.aclose()

    async def _run(self) -> AsyncIterator[bytes]:
        cache, provider, text, rate = self._cache, self._provider, self._text, self._rate
        key = cache.key_for(provider, text, sample_rate=rate, **self._overrides) if text.strip() else None
        if key is None:
            async with self._live() as live:
                async for pcm in live:
                    yield pcm
            return
        entry = await cache.lookup(key)
        if entry is not None and entry.sample_rate == rate:
            cache._count(hit=True)
            self.cache = "hit"
            self._turn = turn = CachedTurn(entry, sample_rate=rate, provider=provider.provider)
            await turn.end()
            async for pcm in turn:
                yield pcm
            return
        cache._count(hit=False)
        self.cache = "miss"
        chunks: list[bytes] = []
        size = 0
        async with self._live() as live:
            async for pcm in live:
                if size <= cache.max_entry_bytes:
                    chunks.append(pcm)
                    size += len(pcm)
                yield pcm
        self.hold(None)
        if chunks and size <= cache.max_entry_bytes:  # completed: the live synthesis raised nothing
            wire = provider.describe(sample_rate=rate, **self._overrides).get("wire_format", "")
            cache._store_later(key, cache._entry(text, rate, b"".join(chunks), provider.provider, wire))
