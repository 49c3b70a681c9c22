"""The phrase cache: :class:`PhraseCache` (see docs/cache.md)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ttsbridge._redact import redact
from ttsbridge.cache.backends import CacheBackend, MemoryBackend, RedisBackend, SQLiteBackend
from ttsbridge.cache.entry import PhraseEntry
from ttsbridge.cache.keys import normalise_text, phrase_key
from ttsbridge.cache.turn import CachedTurn, RecordingTurn
from ttsbridge.errors import TTSBridgeError, TTSInvalidOptionError
from ttsbridge.policy.usage import TurnUsage
from ttsbridge.turns import Synthesis, Turn, TurnProvider

__all__ = ["CacheStats", "PhraseCache", "PhraseSynthesis", "WarmReport"]

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


@dataclass
class WarmReport:
    """What :meth:`PhraseCache.warm` did: phrases rendered and stored, already cached, failed."""

    stored: int = 0
    cached: int = 0
    failed: int = 0


#: ``progress(done, total, text, status)`` of :meth:`PhraseCache.warm`; status ``stored|cached|failed``.
Progress = Callable[[int, int, str, str], None]


class PhraseCache:
    """Whole utterances, rendered once and served from then on: greetings, fixed prompts, the goodbye.

    Give it to any surface as ``phrase_cache=`` (one cache may serve many services). A text known before its
    first send (Pipecat ``TTSSpeakFrame``, LiveKit ``say()`` / ``synthesize()``, a provider's
    ``synthesize()``) is looked up under a key of everything that changes its audio
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
        self.lookup_timeout = float(lookup_timeout)
        self.store_timeout = float(store_timeout)
        self.retry_after = float(retry_after)
        self.max_entry_bytes = int(max_entry_bytes)
        self._secrets = tuple(s for s in (getattr(backend, "password", None),) if s)
        self._hits = self._misses = self._stores = self._errors = 0
        self._failing: set[str] = set()  # the operations failing now ("lookup", "store", "stats"): one outage
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

    def _failed(self, exc: BaseException, op: str) -> None:
        """``op`` failed: one warning per outage (the first failure while no operation is failing; a lookup
        that answers while the stores fail ends nothing), and ``op`` is left alone for ``retry_after``."""
        self._errors += 1
        self._down_until[op] = time.monotonic() + self.retry_after
        what = redact(f"{type(exc).__name__}: {exc}", self._secrets)
        if not self._failing:
            logger.warning(
                "phrase cache %s failed (%s); rendering live, trying it again in %.0f s",
                self.backend.describe(),
                what,
                self.retry_after,
            )
        else:
            logger.debug("phrase cache %s failed again (%s)", self.backend.describe(), what)
        self._failing.add(op)

    def _ok(self, op: str) -> None:
        if op in self._failing:
            self._failing.discard(op)
            if not self._failing:
                logger.info("phrase cache %s answers again", self.backend.describe())

    def _resting(self, op: str) -> bool:
        """``op`` failed less than ``retry_after`` ago: not tried (a lookup misses at once)."""
        until = self._down_until.get(op)
        return until is not None and time.monotonic() < until

    async def _call(self, op: Any, timeout: float) -> Any:
        if not self.backend.blocking:
            return await op
        if sys.version_info >= (3, 11):  # no task of its own (wait_for on 3.10 costs one more loop turn)
            async with asyncio.timeout(timeout):
                return await op
        return await asyncio.wait_for(op, timeout)  # pragma: no cover - Python 3.10

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

    def _entry(self, text: str, rate: int, pcm: bytes, provider: str, wire_format: str) -> PhraseEntry:
        return PhraseEntry(
            text=normalise_text(text),
            sample_rate=rate,
            pcm=pcm,
            provider=provider,
            wire_format=wire_format,
            created=time.time(),
        )

    async def open_turn(
        self,
        provider: TurnProvider,
        text: str,
        *,
        sample_rate: int,
        segments: Sequence[str] | None = None,
        timeout: float | None = None,
        **overrides: Any,
    ) -> Turn:
        """A turn for ``text`` (see :meth:`TurnProvider.open_phrase`): a :class:`CachedTurn` on a hit, else the
        provider's live turn wrapped in a :class:`RecordingTurn` (a plain live turn when the provider cannot be
        cached). The caller sends ``segments`` (default ``[text]``) and ends the turn as usual."""
        key = self.key_for(provider, text, sample_rate=sample_rate, segments=segments, **overrides)
        if key is None or not text.strip():
            return await provider.open_turn(sample_rate=sample_rate, timeout=timeout, **overrides)
        entry = await self.lookup(key)
        if entry is not None and entry.sample_rate == sample_rate:
            self._hits += 1
            return CachedTurn(entry, sample_rate=sample_rate, provider=provider.provider)
        self._misses += 1
        inner = await provider.open_turn(sample_rate=sample_rate, timeout=timeout, **overrides)
        turn: RecordingTurn

        def complete(pcm: bytes) -> None:
            self._store_later(key, self._entry(text, sample_rate, pcm, provider.provider, turn.wire_format))

        turn = RecordingTurn(
            inner,
            segments=[text] if segments is None else segments,
            on_complete=complete,
            max_bytes=self.max_entry_bytes,
        )
        return turn

    def synthesize(
        self, provider: TurnProvider, text: str, *, sample_rate: int, **overrides: Any
    ) -> PhraseSynthesis:
        """``provider.synthesize(text)`` through the cache (what a provider with ``phrase_cache=`` does)."""
        return PhraseSynthesis(self, provider, text, sample_rate, overrides)

    async def _render(
        self, provider: TurnProvider, text: str, rate: int, segments: Sequence[str], overrides: dict[str, Any]
    ) -> bytes:
        """A live turn of ``text`` sent as ``segments`` (each one as it is), read whole; raises if it did not
        complete."""
        turn = await provider.open_turn(sample_rate=rate, **overrides)
        try:
            for part in segments:
                await turn.send(part)
            await turn.end()
            pcm = b"".join([chunk async for chunk in turn])
        finally:
            if not turn.done:
                await turn.cancel()
        if turn.outcome != "done" or not pcm:
            raise TTSBridgeError(
                f"phrase cache: the turn for {text[:40]!r} ended {turn.outcome}, nothing stored"
            )
        return pcm

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
        provider, rate, split = _surface(tts, sample_rate)
        phrases = [t for t in texts if t.strip()]
        report = WarmReport()
        for n, text in enumerate(phrases, 1):
            segments = split(text)
            key = self.key_for(provider, text, sample_rate=rate, segments=segments, **overrides)
            if key is None:
                raise TTSInvalidOptionError(
                    "tts", type(tts).__name__, "a surface whose provider can be cached"
                )
            status = "cached"
            if await self.lookup(key) is None:
                try:
                    pcm = await self._render(provider, text, rate, segments, overrides)
                except TTSBridgeError as exc:
                    logger.warning("phrase cache: warming %r failed: %s", text[:40], exc)
                    status = "failed"
                else:
                    entry = self._entry(
                        text,
                        rate,
                        pcm,
                        provider.provider,
                        provider.describe(sample_rate=rate).get("wire_format", ""),
                    )
                    status = "stored" if await self.store(key, entry) else "failed"
            setattr(report, status, getattr(report, status) + 1)
            if progress is not None:
                progress(n, len(phrases), text, status)
        return report


def _surface(tts: Any, sample_rate: int | None) -> tuple[TurnProvider, int, Callable[[str], list[str]]]:
    """(provider, output rate, how a known text is split into sends) of a provider, Pipecat service or LiveKit
    TTS."""
    whole: Callable[[str], list[str]] = lambda text: [text]  # noqa: E731
    if isinstance(tts, TurnProvider):
        provider, rate, split = tts, sample_rate, whole
    elif isinstance(getattr(tts, "turn_provider", None), TurnProvider):  # LiveKit TurnTTS
        tokenizer = tts._sentence_tokenizer
        provider, rate = tts.turn_provider, sample_rate or tts.sample_rate
        # as the stream sends a known text: each sentence of the plugin's tokenizer, with a space after it
        split = lambda text: [s + " " for s in tokenizer.tokenize(text)] or [text]  # noqa: E731
    elif isinstance(getattr(tts, "provider", None), TurnProvider):  # a Pipecat service
        provider, rate, split = (
            tts.provider,
            sample_rate or tts.sample_rate or getattr(tts, "_init_sample_rate", None),
            whole,
        )
    else:
        raise TTSInvalidOptionError(
            "tts",
            type(tts).__name__,
            "a TurnProvider, a ttsbridge Pipecat service or a LiveKit TTS of ttsbridge",
        )
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise TTSInvalidOptionError(
            "sample_rate", rate, "the output rate in Hz (the rate the pipeline plays)"
        )
    return provider, rate, split


class PhraseSynthesis(Synthesis):
    """``provider.synthesize(text)`` through the cache: a :class:`~ttsbridge.turns.Synthesis` (its
    ``take_received`` is the live synthesis' on a miss, so a caller that gives a miss up after audio loses
    none of it). ``cache`` says ``"hit"`` or ``"miss"`` once the first chunk was asked for (None: the provider
    cannot be cached); ``usage`` is the hit's (nothing billed), None for a miss."""

    def __init__(
        self,
        cache: PhraseCache,
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

    @contextlib.asynccontextmanager
    async def _live(self) -> AsyncIterator[AsyncIterator[bytes]]:
        """The live synthesis, closed with this one (its response released at once, not when collected)."""
        live = self._provider.synthesize_live(self._text, sample_rate=self._rate, **self._overrides)
        self.hold(getattr(live, "take_received", None))  # given up mid-way: what the live synthesis holds
        try:
            yield live
        finally:
            close = getattr(live, "aclose", None)
            if close is not None:
                await close()

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
            cache._hits += 1
            self.cache = "hit"
            self._turn = turn = CachedTurn(entry, sample_rate=rate, provider=provider.provider)
            await turn.end()
            async for pcm in turn:
                yield pcm
            return
        cache._misses += 1
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
