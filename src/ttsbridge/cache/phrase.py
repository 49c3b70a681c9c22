"""The phrase cache: :class:`PhraseCache` (see docs/cache.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ttsbridge._redact import redact
from ttsbridge.cache.backends import (
    CacheBackend,
    MemoryBackend,
    RedisBackend,
    SQLiteBackend,
    _positive_int,
    seconds,
)
from ttsbridge.cache.entry import PhraseEntry
from ttsbridge.cache.keys import normalise_text, phrase_key
from ttsbridge.cache.warm import Progress, WarmReport, warm_phrases
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.turns import TurnProvider

__all__ = ["CacheStats", "PhraseCache"]

logger = logging.getLogger("ttsbridge.cache")

_MIB = 1 << 20


@dataclass(frozen=True)
class CacheStats:
    """``cache.stats()``: this process' lookups (``hits``, ``misses``), what the backend holds (``bytes``,
    ``entries``: all processes' entries for SQLite and Redis), entries this process stored, and backend
    failures (each one rendered live)."""

    hits: int
    misses: int
    bytes: int
    entries: int
    stores: int
    errors: int


class PhraseCache:
    """Whole utterances, rendered once and served from then on: greetings, fixed prompts, the goodbye.

    Give it to any framework surface as ``phrase_cache=`` (one cache may serve many services), or wrap a
    provider in it: :class:`~ttsbridge.cache.CachedProvider`. A text known before its first send (Pipecat
    ``TTSSpeakFrame``, LiveKit ``say()`` / ``synthesize()``, a cached provider's ``synthesize()`` and
    ``open_phrase()``) is looked up under a key of everything that changes its audio
    (:meth:`TurnProvider.cache_identity` and the normalised text); a hit is a :class:`CachedTurn` (no
    request, nothing billed), a miss renders live and is stored once it completed cleanly. A failing backend
    (file locked, Redis down) makes lookups misses and stores no-ops, with one warning per outage; it is
    tried again after ``retry_after`` seconds.

    Build it with :meth:`memory`, :meth:`sqlite` or :meth:`redis`.

    Args:
        backend: where entries live.
        scope: the account part of the key (default: a digest of each provider's API key). Set it (e.g.
            ``"acme-prod"``) to keep entries across a key rotation; never put a secret here.
        lookup_timeout: bound on one lookup (then a miss); stores are bounded by ``store_timeout``.
        retry_after: after a backend failure, seconds during which it is not asked (lookups miss at once).
        max_entry_bytes: longer utterances are not stored.
    """

    def __init__(
        self,
        backend: CacheBackend,
        *,
        scope: str | None = None,
        lookup_timeout: float = 0.25,
        store_timeout: float = 5.0,
        retry_after: float = 5.0,
        max_entry_bytes: int = 16 * _MIB,
    ) -> None:
        if not isinstance(backend, CacheBackend):
            raise TTSInvalidOptionError("backend", type(backend).__name__, "a ttsbridge.cache.CacheBackend")
        if scope is not None and (not isinstance(scope, str) or not scope.strip()):
            raise TTSInvalidOptionError("scope", scope, "a non-empty string, or None")
        self.backend = backend
        self.scope = scope
        self.lookup_timeout = seconds("lookup_timeout", lookup_timeout)
        self.store_timeout = seconds("store_timeout", store_timeout)
        self.retry_after = seconds("retry_after", retry_after, zero=True)
        self.max_entry_bytes = _positive_int("max_entry_bytes", max_entry_bytes)
        #: seconds after which an operation's last failure no longer holds an outage open (it was not tried
        #: again): the next failure of another operation warns again
        self.outage_forgotten_after = 60.0
        self._secrets = tuple(s for s in (getattr(backend, "password", None),) if s)
        self._hits = self._misses = self._stores = self._errors = 0
        #: the operations failing now ("lookup", "store", "stats") -> when each last failed: one outage
        self._failing: dict[str, float] = {}
        self._down_until: dict[str, float] = {}  # operation -> monotonic time before which it is not tried
        self._pending: set[asyncio.Task[Any]] = set()

    # -- constructors

    @classmethod
    def memory(cls, max_bytes: int = 64 * _MIB, **kwargs: Any) -> PhraseCache:
        """In this process, least recently used entries evicted past ``max_bytes``."""
        return cls(MemoryBackend(max_bytes), **kwargs)

    @classmethod
    def sqlite(
        cls,
        path: str | os.PathLike[str],
        max_bytes: int = 512 * _MIB,
        *,
        busy_timeout: float = 2.0,
        **kwargs: Any,
    ) -> PhraseCache:
        """One SQLite file (WAL) shared by every process of the host; least recently used rows deleted past
        ``max_bytes``."""
        return cls(SQLiteBackend(path, max_bytes, busy_timeout=busy_timeout), **kwargs)

    @classmethod
    def redis(
        cls,
        url: str,
        ttl: float | None = 7 * 86400.0,
        *,
        prefix: str = "ttsbridge:phrase:",
        timeout: float = 0.5,
        **kwargs: Any,
    ) -> PhraseCache:
        """Redis for a fleet across hosts: entries expire ``ttl`` seconds after they were stored (None: never;
        Redis' ``maxmemory`` policy then bounds the size). ``timeout`` bounds connecting and each call."""
        return cls(RedisBackend(url, ttl=ttl, prefix=prefix, timeout=timeout), **kwargs)

    # -- for tests and dashboards

    def __repr__(self) -> str:
        return f"PhraseCache({self.backend.describe()})"

    def __len__(self) -> int:
        try:
            n = self.backend.count()
        except Exception as exc:
            self._failed(exc, "stats")
            return 0
        self._ok("stats")
        return n

    def stats(self) -> CacheStats:
        try:
            size, entries = self.backend.size(), self.backend.count()
        except Exception as exc:
            self._failed(exc, "stats")
            size = entries = 0
        else:
            self._ok("stats")
        return CacheStats(self._hits, self._misses, size, entries, self._stores, self._errors)

    # -- the key

    def key_for(
        self,
        provider: TurnProvider,
        text: str,
        *,
        sample_rate: int,
        segments: Sequence[str] | None = None,
        **overrides: Any,
    ) -> str | None:
        """The entry key for ``text`` sent as ``segments`` (default ``[text]``) on ``provider``, or None when
        the provider cannot be cached. Raises :class:`TTSInvalidOptionError` for a bad override."""
        identity = provider.cache_identity(sample_rate=sample_rate, **overrides)
        if identity is None:
            return None
        if self.scope is not None:
            identity = {**identity, "account": self.scope}
        return phrase_key(identity, text if segments is None else segments)

    # -- the backend, degraded on failure

    def _forget_old_failures(self, now: float) -> None:
        """An operation that last failed ``outage_forgotten_after`` ago and was not tried since (a ``stats()``
        of a dashboard gone) no longer holds the outage open."""
        horizon = now - self.outage_forgotten_after
        for op in [op for op, when in self._failing.items() if when < horizon]:
            del self._failing[op]

    def _failed(self, exc: BaseException, op: str) -> None:
        """``op`` failed: one warning per outage (the first failure while no operation is failing; a lookup
        that answers while the stores fail ends nothing), and ``op`` is left alone for ``retry_after``."""
        self._errors += 1
        now = time.monotonic()
        self._down_until[op] = now + self.retry_after
        what = redact(f"{type(exc).__name__}: {exc}", self._secrets)
        self._forget_old_failures(now)
        if not self._failing:
            logger.warning(
                "phrase cache %s failed (%s); rendering live, trying it again in %.0f s",
                self.backend.describe(),
                what,
                self.retry_after,
            )
        else:
            logger.debug("phrase cache %s failed again (%s)", self.backend.describe(), what)
        self._failing[op] = now

    def _ok(self, op: str) -> None:
        if self._failing and self._failing.pop(op, None) is not None:
            self._forget_old_failures(time.monotonic())
            if not self._failing:
                logger.info("phrase cache %s answers again", self.backend.describe())

    def _resting(self, op: str) -> bool:
        """``op`` failed less than ``retry_after`` ago: not tried (a lookup misses at once)."""
        until = self._down_until.get(op)
        return until is not None and time.monotonic() < until

    async def _call(self, op: Any, timeout: float) -> Any:
        if not self.backend.blocking:
            return await op
        try:
            if sys.version_info >= (3, 11):  # no task of its own (wait_for on 3.10 costs one more loop turn)
                async with asyncio.timeout(timeout):
                    return await op
            return await asyncio.wait_for(op, timeout)  # pragma: no cover - Python 3.10
        except (TimeoutError, asyncio.TimeoutError):  # one class from 3.11; it says nothing, the warning will
            raise TimeoutError(f"no answer within {timeout:g} s") from None

    async def lookup(self, key: str) -> PhraseEntry | None:
        """The entry under ``key``, or None (also when the backend fails: see the class docs). Counts no hit
        or miss."""
        if self._resting("lookup"):
            return None
        try:
            blob = await self._call(self.backend.get(key), self.lookup_timeout)
        except Exception as exc:
            self._failed(exc, "lookup")
            return None
        self._ok("lookup")
        if blob is None:
            return None
        try:
            return PhraseEntry.from_bytes(blob)
        except (ValueError, KeyError, TypeError) as exc:
            logger.debug("phrase cache: unreadable entry %s… ignored (%s)", key[:12], exc)
            return None

    async def store(self, key: str, entry: PhraseEntry) -> bool:
        """Store ``entry`` under ``key``; False when it was not stored (too long, or the backend failed)."""
        if entry.nbytes > self.max_entry_bytes:
            return False
        if self._resting("store"):
            return False
        try:
            await self._call(self.backend.put(key, entry.to_bytes()), self.store_timeout)
        except Exception as exc:
            self._failed(exc, "store")
            return False
        self._ok("store")
        self._stores += 1
        return True

    def _store_later(self, key: str, entry: PhraseEntry) -> None:
        task = asyncio.get_running_loop().create_task(self.store(key, entry), name="phrase-cache-store")
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def flush(self) -> None:
        """Wait (bounded) for the stores started by completed turns."""
        if self._pending:
            await asyncio.wait(set(self._pending), timeout=self.store_timeout + 1.0)

    async def clear(self) -> None:
        """Drop every entry (of every process, for SQLite and Redis)."""
        await self.backend.clear()

    async def aclose(self) -> None:
        await self.flush()
        await self.backend.aclose()

    # -- serving

    def _count(self, *, hit: bool) -> None:
        """A lookup of a turn or synthesis (``stats()``' hits and misses)."""
        if hit:
            self._hits += 1
        else:
            self._misses += 1

    def _entry(self, text: str, rate: int, pcm: bytes, provider: str, wire_format: str) -> PhraseEntry:
        return PhraseEntry(
            text=normalise_text(text),
            sample_rate=rate,
            pcm=pcm,
            provider=provider,
            wire_format=wire_format,
            created=time.time(),
        )

    async def warm(
        self,
        tts: Any,
        texts: Iterable[str],
        *,
        sample_rate: int | None = None,
        progress: Progress | None = None,
        **overrides: Any,
    ) -> WarmReport:
        """Render ``texts`` ahead of time (LiveKit's ``prewarm_fnc``, a Pipecat bot's start), one after the other,
        skipping those already cached. ``tts``: a provider, a Pipecat service or a LiveKit TTS of this package;
        each text is sent as that surface sends a known text (LiveKit ``stream()``: sentence by sentence), at its
        output rate (``sample_rate`` for a Pipecat service built without one). A failed phrase is logged and
        counted, not raised."""
        return await warm_phrases(self, tts, texts, sample_rate=sample_rate, progress=progress, **overrides)
