"""What the cache's helpers (:mod:`~ttsbridge.cache.synthesis`, :mod:`~ttsbridge.cache.warm`) use of a
:class:`~ttsbridge.cache.PhraseCache`, as a protocol: they are typed against it and do not import
``phrase.py``, which imports them (no import cycle)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from ttsbridge.cache.entry import PhraseEntry
from ttsbridge.turns import TurnProvider

__all__ = ["PhraseStore"]


class PhraseStore(Protocol):
    """The lookups, stores and counters of a :class:`~ttsbridge.cache.PhraseCache`."""

    max_entry_bytes: int

    def key_for(
        self,
        provider: TurnProvider,
        text: str,
        *,
        sample_rate: int,
        segments: Sequence[str] | None = None,
        **overrides: Any,
    ) -> str | None: ...

    async def lookup(self, key: str) -> PhraseEntry | None: ...

    async def store(self, key: str, entry: PhraseEntry) -> bool: ...

    def _store_later(self, key: str, entry: PhraseEntry) -> None: ...

    def _count(self, *, hit: bool) -> None: ...

    def _entry(self, text: str, rate: int, pcm: bytes, provider: str, wire_format: str) -> PhraseEntry: ...
