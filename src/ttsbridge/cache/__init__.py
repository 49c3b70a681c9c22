"""A phrase cache: greetings and fixed prompts spoken at once and billed once, shared by every process of a
fleet (docs/cache.md).

    from ttsbridge.cache import CachedProvider, PhraseCache

    cache = PhraseCache.sqlite("/var/cache/agent/phrases.db", max_bytes=256 << 20)   # or .memory() / .redis(url)
    tts = nineninesix.TTS(voice=..., phrase_cache=cache)                             # any surface: phrase_cache=
    provider = CachedProvider(NineninesixTurnProvider(options=...), cache)           # no framework: wrap it
    await cache.warm(tts, ["Hello! How can I help?", "Goodbye!"])                    # e.g. in prewarm_fnc
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttsbridge._lazy import lazy_attributes

if TYPE_CHECKING:
    from ttsbridge.cache.backends import CacheBackend, MemoryBackend, RedisBackend, SQLiteBackend
    from ttsbridge.cache.entry import PhraseEntry
    from ttsbridge.cache.keys import account_scope, normalise_text, phrase_key
    from ttsbridge.cache.phrase import CacheStats, PhraseCache
    from ttsbridge.cache.provider import CachedProvider
    from ttsbridge.cache.synthesis import PhraseSynthesis
    from ttsbridge.cache.turn import CachedTurn, RecordingTurn
    from ttsbridge.cache.warm import WarmReport

# imported on first use: a service that is given no phrase cache never imports it (nor SQLite)
__getattr__, __dir__ = lazy_attributes(
    __name__,
    {
        "CacheBackend": "ttsbridge.cache.backends",
        "MemoryBackend": "ttsbridge.cache.backends",
        "RedisBackend": "ttsbridge.cache.backends",
        "SQLiteBackend": "ttsbridge.cache.backends",
        "PhraseEntry": "ttsbridge.cache.entry",
        "account_scope": "ttsbridge.cache.keys",
        "normalise_text": "ttsbridge.cache.keys",
        "phrase_key": "ttsbridge.cache.keys",
        "CacheStats": "ttsbridge.cache.phrase",
        "PhraseCache": "ttsbridge.cache.phrase",
        "CachedProvider": "ttsbridge.cache.provider",
        "PhraseSynthesis": "ttsbridge.cache.synthesis",
        "CachedTurn": "ttsbridge.cache.turn",
        "RecordingTurn": "ttsbridge.cache.turn",
        "WarmReport": "ttsbridge.cache.warm",
    },
    globals(),
)

__all__ = [
    "CacheBackend",
    "CacheStats",
    "CachedProvider",
    "CachedTurn",
    "MemoryBackend",
    "PhraseCache",
    "PhraseEntry",
    "PhraseSynthesis",
    "RecordingTurn",
    "RedisBackend",
    "SQLiteBackend",
    "WarmReport",
    "account_scope",
    "normalise_text",
    "phrase_key",
]
