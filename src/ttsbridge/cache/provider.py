"""A provider through the phrase cache: :class:`CachedProvider`, a :class:`~ttsbridge.turns.TurnProvider`
around a provider, as an HTTP cache is a transport around a transport (hishel's ``CacheTransport`` around
httpx's): the provider knows nothing of the cache, and the cache nothing of the provider but its
``cache_identity``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from ttsbridge.cache.phrase import PhraseCache
from ttsbridge.cache.synthesis import PhraseSynthesis
from ttsbridge.cache.turn import CachedTurn, RecordingTurn
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.turns import OptionsT, Turn, TurnProvider

__all__ = ["CachedProvider"]


class CachedProvider(TurnProvider[OptionsT]):
    """``provider`` with its whole known texts served from ``cache``.

        provider = CachedProvider(NineninesixTurnProvider(options=...), cache)
        audio = provider.synthesize("Hello! How can I help?", sample_rate=24000)   # a hit sends nothing
        turn = await provider.open_phrase("Hello! How can I help?", sample_rate=24000)   # the same, as a turn

    A text known whole before anything is sent goes through the cache: :meth:`synthesize` and
    :meth:`open_phrase` look it up (a hit is a :class:`CachedTurn`: no request, nothing billed) and render a
    miss live, stored once it completed cleanly. :meth:`open_turn` (text still to come) is the wrapped
    provider's, never cached; so are the options, :meth:`describe`, :meth:`cache_identity` and
    :meth:`prewarm`. :meth:`aclose` closes the wrapped provider, not the cache (the application's: one cache
    may serve many providers). The framework surfaces build one from their ``phrase_cache=`` argument and use
    it for the texts they know whole (Pipecat ``TTSSpeakFrame``, LiveKit ``say()`` / ``synthesize()``).
    """

    def __init__(self, provider: TurnProvider[OptionsT], cache: PhraseCache) -> None:
        if not isinstance(provider, TurnProvider):
            raise TTSInvalidOptionError("provider", type(provider).__name__, "a ttsbridge TurnProvider")
        if not isinstance(cache, PhraseCache):
            raise TTSInvalidOptionError("cache", type(cache).__name__, "a ttsbridge.cache.PhraseCache")
        #: the provider that renders (every miss, every turn whose text is still to come)
        self.wrapped = provider
        self.cache = cache

    def __repr__(self) -> str:
        return f"CachedProvider({self.wrapped!r}, {self.cache!r})"

    @property
    def provider(self) -> str:
        """The wrapped provider's name (``TurnProvider.provider``)."""
        return self.wrapped.provider

    # -- the wrapped provider's

    @property
    def options(self) -> OptionsT:
        return self.wrapped.options

    def update_options(self, **options: Any) -> None:
        self.wrapped.update_options(**options)

    async def open_turn(self, *, sample_rate: int, timeout: float | None = None, **overrides: Any) -> Turn:
        return await self.wrapped.open_turn(sample_rate=sample_rate, timeout=timeout, **overrides)

    def describe(self, *, sample_rate: int, **overrides: Any) -> dict[str, str]:
        return self.wrapped.describe(sample_rate=sample_rate, **overrides)

    def cache_identity(self, *, sample_rate: int, **overrides: Any) -> dict[str, Any] | None:
        return self.wrapped.cache_identity(sample_rate=sample_rate, **overrides)

    async def prewarm(self, sample_rate: int | None = None) -> None:
        await self.wrapped.prewarm(sample_rate=sample_rate)

    async def aclose(self) -> None:
        await self.wrapped.aclose()

    # -- through the cache

    def synthesize(self, text: str, *, sample_rate: int, **overrides: Any) -> PhraseSynthesis:
        """The wrapped provider's ``synthesize(text)`` through the cache: a :class:`PhraseSynthesis` (its
        ``cache`` says ``"hit"`` or ``"miss"``; its ``usage`` is a hit's, billed nothing)."""
        return PhraseSynthesis(self.cache, self.wrapped, text, sample_rate, overrides)

    async def open_phrase(
        self,
        text: str,
        *,
        sample_rate: int,
        segments: Sequence[str] | None = None,
        timeout: float | None = None,
        **overrides: Any,
    ) -> Turn:
        """A turn for ``text``, whose whole text is known before anything is sent (a ``TTSSpeakFrame``, a
        ``say()``): a :class:`CachedTurn` on a hit, else the wrapped provider's live turn in a
        :class:`RecordingTurn` (stored once it completed cleanly; a plain live turn when the provider cannot be
        cached). The caller sends ``segments`` (default ``[text]``: how the text is sent, which changes the
        audio) and ends the turn as usual. Raises :class:`TTSInvalidOptionError` for a bad override."""
        cache, live = self.cache, self.wrapped
        key = cache.key_for(live, text, sample_rate=sample_rate, segments=segments, **overrides)
        if key is None or not text.strip():
            return await live.open_turn(sample_rate=sample_rate, timeout=timeout, **overrides)
        entry = await cache.lookup(key)
        if entry is not None and entry.sample_rate == sample_rate:
            cache._count(hit=True)
            return CachedTurn(entry, sample_rate=sample_rate, provider=live.provider)
        cache._count(hit=False)
        inner = await live.open_turn(sample_rate=sample_rate, timeout=timeout, **overrides)

        def complete(pcm: bytes) -> None:
            entry = cache._entry(text, sample_rate, pcm, live.provider, inner.wire_format)
            cache._store_later(key, entry)

        recording = RecordingTurn(
            inner,
            segments=[text] if segments is None else segments,
            on_complete=complete,
            max_bytes=cache.max_entry_bytes,
        )
        return cast(Turn, recording)  # (a Turn by registration: see RecordingTurn)
