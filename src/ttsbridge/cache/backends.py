"""Where phrase cache entries live: one small async interface (:class:`CacheBackend`), three backends.

* :class:`MemoryBackend`: in-process LRU bounded in bytes (the default; one process only).
* :class:`SQLiteBackend`: one SQLite file in WAL mode, safe for many processes on one host (a LiveKit worker
  runs every job in a process of its own); ``sqlite3`` from the standard library, run in a thread.
* :class:`RedisBackend`: Redis (redis-py's asyncio client) for a fleet across hosts; entries expire after
  ``ttl`` seconds, Redis' own ``maxmemory`` policy bounds the size.

Backends store opaque bytes (:meth:`~ttsbridge.cache.entry.PhraseEntry.to_bytes`) under the 64-hex key and
raise whatever their library raises: the :class:`~ttsbridge.cache.PhraseCache` above them turns a failure
into a live render and one warning. ``count()`` and ``size()`` are synchronous (``len(cache)``,
``cache.stats()``: for tests and dashboards); on Redis they scan the cache's keys.
"""

from __future__ import annotations

import abc
import asyncio
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ttsbridge._redact import safe_url
from ttsbridge.errors import TTSInvalidOptionError

__all__ = ["CacheBackend", "MemoryBackend", "RedisBackend", "SQLiteBackend"]


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise TTSInvalidOptionError(name, value, "a whole number of bytes > 0")
    return value


def seconds(name: str, value: Any, *, zero: bool = False) -> float:
    """``value`` as seconds (> 0, or >= 0 with ``zero``), else a typed error naming ``name``."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # (not NaN)
    if not ok or value < 0 or (value == 0 and not zero):
        raise TTSInvalidOptionError(
            name, value, "a number of seconds >= 0" if zero else "a number of seconds > 0"
        )
    return float(value)


class CacheBackend(abc.ABC):
    """Opaque entries under string keys. Implementations may raise on any call; the cache copes."""

    #: short name for logs and ``repr`` (``"memory"``, ``"sqlite"``, ``"redis"``)
    kind: str = ""
    #: True when calls wait on I/O (then the cache bounds them in time)
    blocking: bool = True

    @abc.abstractmethod
    async def get(self, key: str) -> bytes | None:
        """The entry's bytes, or None."""

    @abc.abstractmethod
    async def put(self, key: str, blob: bytes) -> None:
        """Store (or replace) an entry."""

    @abc.abstractmethod
    def count(self) -> int:
        """How many entries (synchronous)."""

    @abc.abstractmethod
    def size(self) -> int:
        """Bytes held (synchronous)."""

    @abc.abstractmethod
    async def clear(self) -> None:
        """Drop every entry of this cache."""

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Release connections and files."""

    def describe(self) -> str:
        """Where the entries are, safe to log (no password)."""
        return self.kind


class MemoryBackend(CacheBackend):
    """An LRU in this process, bounded in bytes: storing past ``max_bytes`` evicts the least recently used
    entries; an entry larger than the bound is not stored."""

    kind = "memory"
    blocking = False

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = _positive_int("max_bytes", max_bytes)
        self._entries: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0

    @staticmethod
    def _weight(key: str, blob: bytes) -> int:
        return len(key) + len(blob)

    async def get(self, key: str) -> bytes | None:
        blob = self._entries.get(key)
        if blob is not None:
            self._entries.move_to_end(key)
        return blob

    async def put(self, key: str, blob: bytes) -> None:
        weight = self._weight(key, blob)
        if weight > self.max_bytes:
            return
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= self._weight(key, old)
        self._entries[key] = blob
        self._bytes += weight
        while self._bytes > self.max_bytes:
            k, b = self._entries.popitem(last=False)
            self._bytes -= self._weight(k, b)

    def count(self) -> int:
        return len(self._entries)

    def size(self) -> int:
        return self._bytes

    async def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0

    def describe(self) -> str:
        return f"memory(max_bytes={self.max_bytes})"


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS phrases ("
    " key TEXT PRIMARY KEY, entry BLOB NOT NULL, bytes INTEGER NOT NULL, used REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS phrases_used ON phrases(used)",
)
#: How long a hit's "last used" time may wait before it is written (one write per many hits).
_TOUCH_EVERY_S = 10.0


@dataclass
class _Link:
    """One connection to the SQLite file and the lock that lets one thread at a time use it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    conn: sqlite3.Connection | None = None


class SQLiteBackend(CacheBackend):
    """One SQLite file shared by every process of the host: WAL (readers never wait for a writer), one row per
    entry, least recently used rows deleted when a store passes ``max_bytes`` (the bound holds for the file's
    rows as a whole, whichever process stores). Hits update their "last used" time in batches, off the hit's
    path. Calls run in a thread (``asyncio.to_thread``); a file locked longer than ``busy_timeout`` raises."""

    kind = "sqlite"

    def __init__(self, path: str | os.PathLike[str], max_bytes: int, *, busy_timeout: float = 2.0) -> None:
        self.path = os.fspath(path)
        self.max_bytes = _positive_int("max_bytes", max_bytes)
        parent = os.path.dirname(os.path.abspath(self.path))
        if not os.path.isdir(parent):
            raise TTSInvalidOptionError("path", self.path, "a file in an existing directory")
        self.busy_timeout = seconds("busy_timeout", busy_timeout)
        # Two connections, each used by one thread at a time: lookups never queue behind a store that waits
        # for the file's write lock (another process writing: up to busy_timeout), as WAL readers need not.
        self._reader = _Link()
        self._writer = _Link()
        self._touched: dict[str, float] = {}  # hits not yet written: written by the worker thread
        self._touch_lock = threading.Lock()  # the loop adds to it while the worker thread takes it
        self._touch_due = 0.0
        self._background: set[asyncio.Task[Any]] = set()

    def _connect(self, link: _Link) -> sqlite3.Connection:
        if link.conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                for stmt in _SCHEMA:
                    conn.execute(stmt)
            except BaseException:
                conn.close()
                raise
            link.conn = conn
        return link.conn

    # -- in the thread

    def _get(self, key: str) -> bytes | None:
        with self._reader.lock:
            row = (
                self._connect(self._reader)
                .execute("SELECT entry FROM phrases WHERE key = ?", (key,))
                .fetchone()
            )
        return bytes(row[0]) if row is not None else None

    def _flush_touches(self, conn: sqlite3.Connection) -> None:
        with self._touch_lock:
            touched, self._touched = self._touched, {}
        if touched:
            conn.executemany(
                "UPDATE phrases SET used = max(used, ?) WHERE key = ?", [(t, k) for k, t in touched.items()]
            )

    def _touch(self) -> None:
        with self._writer.lock:
            conn = self._connect(self._writer)
            conn.execute("BEGIN IMMEDIATE")
            try:
                self._flush_touches(conn)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _put(self, key: str, blob: bytes) -> None:
        weight = len(key) + len(blob)
        if weight > self.max_bytes:
            return
        with self._writer.lock:
            conn = self._connect(self._writer)
            conn.execute("BEGIN IMMEDIATE")  # one writer at a time across processes: the bound holds
            try:
                self._flush_touches(conn)
                conn.execute(
                    "INSERT OR REPLACE INTO phrases (key, entry, bytes, used) VALUES (?, ?, ?, ?)",
                    (key, blob, weight, time.time()),
                )
                (total,) = conn.execute("SELECT COALESCE(SUM(bytes), 0) FROM phrases").fetchone()
                if total > self.max_bytes:
                    doomed: list[tuple[str]] = []
                    for k, n in conn.execute(
                        "SELECT key, bytes FROM phrases WHERE key != ? ORDER BY used", (key,)
                    ):
                        if total <= self.max_bytes:
                            break
                        doomed.append((k,))
                        total -= n
                    conn.executemany("DELETE FROM phrases WHERE key = ?", doomed)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _scalar(self, sql: str) -> int:
        """A read on a connection of its own: called from the event loop, it never waits for a worker
        thread's lock (nor, in WAL mode, for a writer)."""
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout, isolation_level=None)
        try:
            for stmt in _SCHEMA:
                conn.execute(stmt)
            (value,) = conn.execute(sql).fetchone()
        finally:
            conn.close()
        return int(value)

    def _clear(self) -> None:
        with self._writer.lock:
            self._connect(self._writer).execute("DELETE FROM phrases")

    def _close(self) -> None:
        with self._reader.lock:
            conn, self._reader.conn = self._reader.conn, None
            if conn is not None:
                conn.close()
        with self._writer.lock:
            conn, self._writer.conn = self._writer.conn, None
            if conn is not None:
                try:
                    if self._touched:
                        conn.execute("BEGIN IMMEDIATE")
                        self._flush_touches(conn)
                        conn.execute("COMMIT")
                finally:
                    conn.close()

    # -- the interface

    async def get(self, key: str) -> bytes | None:
        blob = await asyncio.to_thread(self._get, key)
        if blob is not None:
            now = time.time()
            with self._touch_lock:
                self._touched[key] = now
            if now >= self._touch_due:
                self._touch_due = now + _TOUCH_EVERY_S
                task = asyncio.get_running_loop().create_task(self._touch_later())
                self._background.add(task)
                task.add_done_callback(self._background.discard)
        return blob

    async def _touch_later(self) -> None:
        try:
            await asyncio.to_thread(self._touch)
        except Exception:  # the last-used time is a hint for eviction; a busy file can wait for the next one
            pass

    async def put(self, key: str, blob: bytes) -> None:
        await asyncio.to_thread(self._put, key, blob)

    def count(self) -> int:
        return self._scalar("SELECT COUNT(*) FROM phrases")

    def size(self) -> int:
        return self._scalar("SELECT COALESCE(SUM(bytes), 0) FROM phrases")

    async def clear(self) -> None:
        await asyncio.to_thread(self._clear)

    async def aclose(self) -> None:
        if self._background:
            await asyncio.wait(set(self._background), timeout=self.busy_timeout + 1.0)
        await asyncio.to_thread(self._close)

    def describe(self) -> str:
        return f"sqlite({self.path!r}, max_bytes={self.max_bytes})"


class RedisBackend(CacheBackend):
    """Redis (``redis.asyncio``): ``SET key entry EX ttl`` / ``GET key`` under ``prefix``. Every call is bounded
    by ``timeout`` (connect and read). The URL's password is used to connect and shown nowhere."""

    kind = "redis"

    def __init__(
        self, url: str, *, ttl: float | None, prefix: str = "ttsbridge:phrase:", timeout: float = 0.5
    ):
        allowed = "a redis://[[user]:password@]host[:port][/db], rediss:// or unix:// URL"
        try:
            parts = urlsplit(url) if isinstance(url, str) else None
            if parts is not None:
                parts.port  # noqa: B018 - raises for a port that is not a number
        except ValueError:  # a port that is not a number, a broken IPv6 host... (its text may echo a secret)
            raise TTSInvalidOptionError("url", safe_url(url), allowed) from None
        if parts is None or parts.scheme not in ("redis", "rediss", "unix"):
            raise TTSInvalidOptionError("url", safe_url(str(url)), allowed)
        if ttl is not None:
            seconds("ttl", ttl)  # (None: no expiry)
        try:
            import redis.asyncio as aioredis
        except ImportError as exc:  # pragma: no cover - the extra is in dev
            raise TTSInvalidOptionError(
                "redis", None, "the redis client: pip install 'ttsbridge[redis]'", hint=str(exc)
            ) from None
        self._url = url
        self.ttl = ttl
        self.prefix = prefix
        self.timeout = seconds("timeout", timeout)
        self.password = parts.password
        self._client = aioredis.Redis.from_url(
            url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout, retry_on_timeout=False
        )
        self._sync: Any = None

    async def get(self, key: str) -> bytes | None:
        value = await self._client.get(self.prefix + key)
        return bytes(value) if value is not None else None

    async def put(self, key: str, blob: bytes) -> None:
        ttl_ms = None if self.ttl is None else max(1, int(self.ttl * 1000))
        await self._client.set(self.prefix + key, blob, px=ttl_ms)

    def _sync_client(self) -> Any:
        if self._sync is None:
            import redis

            self._sync = redis.Redis.from_url(
                self._url, socket_timeout=self.timeout, socket_connect_timeout=self.timeout
            )
        return self._sync

    def _keys(self) -> list[bytes]:
        return list(self._sync_client().scan_iter(match=self.prefix + "*", count=1000))

    def count(self) -> int:
        return len(self._keys())

    def size(self) -> int:
        keys = self._keys()
        if not keys:
            return 0
        pipe = self._sync_client().pipeline(transaction=False)
        for k in keys:
            pipe.strlen(k)
        return sum(int(n) for n in pipe.execute()) + sum(len(k) for k in keys)

    async def clear(self) -> None:
        keys = [k async for k in self._client.scan_iter(match=self.prefix + "*", count=1000)]
        if keys:
            await self._client.delete(*keys)

    async def aclose(self) -> None:
        await self._client.aclose()
        if self._sync is not None:
            self._sync.close()
            self._sync = None

    def describe(self) -> str:
        return f"redis({safe_url(self._url)!r}, ttl={self.ttl})"
