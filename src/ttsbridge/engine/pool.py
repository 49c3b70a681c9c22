"""Connection pooling, keyed (modelled on httpcore's ``connection_pool.py`` and LiveKit's ``ConnectionPool``).

One :class:`KeyedPool` per client. ``shared=True`` (Nineninesix: every turn with the same output format shares
one socket): :meth:`acquire` returns the pooled connection for the key, replacing it when it is no longer
usable or has expired. ``shared=False`` (Kitta: one generation per socket): :meth:`acquire` takes the standby
connection out of the pool (or opens one), and :meth:`prefill` opens the next standby ahead of time.

The pool decides nothing about a connection itself: it asks the connection (:class:`Poolable`: an engine
:class:`~ttsbridge.engine.connection.Connection` is one). A shared connection that is no longer usable
(closing, or suspect: a liveness ping is out after a silence or a timeout) is replaced and *retired*
(``retire()``): it takes no new turn and closes itself once the turns still on it are over; ``aclose()``
closes retired connections too. ``factory(key, timeout)`` makes a connection; ``timeout`` is the turn's own
bound on its connect (None: the connection's ``connect_timeout``).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, Protocol, TypeVar

from ttsbridge.errors import TTSConnectionError


class Poolable(Protocol):
    def usable(self) -> bool:
        """Open (or connecting), and able to carry a new turn now."""

    def expired(self) -> bool:
        """Should be replaced before the next turn (idle or open too long, with no turn on it)."""

    def retire(self) -> None:
        """Replaced: take no new turn, close once the turns on it are over."""

    @property
    def age(self) -> float:
        """Seconds since it was made."""

    async def close(self) -> None: ...


K = TypeVar("K", bound=Hashable)
C = TypeVar("C", bound=Poolable)


class KeyedPool(Generic[K, C]):
    """Connections by key; ``factory(key, timeout)`` makes a new one (connected, or connecting)."""

    def __init__(
        self, factory: Callable[[K, float | None], Awaitable[C]], *, shared: bool = True, name: str = ""
    ) -> None:
        self._factory = factory
        self._shared = shared
        self._name = name
        self._conns: dict[K, C] = {}
        self._locks: dict[K, asyncio.Lock] = {}
        self._epoch = 0  # bumped by aclose(): a connect under way then is closed, not pooled
        self._retired: weakref.WeakSet[C] = weakref.WeakSet()  # replaced, closing once their turns end
        self.opened = 0

    def get(self, key: K) -> C | None:
        return self._conns.get(key)

    def discard(self, key: K, conn: C) -> None:
        """Forget ``conn`` (it failed or closed); a later acquire opens a new one."""
        if self._conns.get(key) is conn:
            del self._conns[key]

    async def acquire(self, key: K, timeout: float | None = None) -> C:
        """The connection for ``key`` (shared: the pooled one, replaced when unusable or expired; exclusive:
        taken out of the pool), opened within ``timeout`` when a new one is needed."""
        epoch = self._epoch
        async with self._locks.setdefault(key, asyncio.Lock()):
            self._check(epoch)
            conn = self._conns.get(key)
            if conn is not None and conn.expired():
                del self._conns[key]
                await conn.close()
                conn = None
            if conn is not None and self._shared and not conn.usable():
                del self._conns[key]
                self._retire(conn)
                conn = None
            if conn is None or not conn.usable():
                conn = await self._open(key, epoch, timeout)
                if self._shared:
                    self._conns[key] = conn
            elif not self._shared:
                del self._conns[key]
            return conn

    async def prefill(self, key: K) -> C:
        """Make sure a usable connection for ``key`` is pooled (a standby for the next acquire)."""
        epoch = self._epoch
        async with self._locks.setdefault(key, asyncio.Lock()):
            self._check(epoch)
            conn = self._conns.get(key)
            if conn is not None and conn.usable() and not conn.expired():
                return conn
            if conn is not None:
                del self._conns[key]
                await conn.close()
            conn = self._conns[key] = await self._open(key, epoch, None)
            return conn

    def take(self, key: K) -> C | None:
        """Take the pooled connection for ``key`` out of the pool (None: none)."""
        return self._conns.pop(key, None)

    async def _open(self, key: K, epoch: int, timeout: float | None) -> C:
        conn = await self._factory(key, timeout)
        if self._epoch != epoch:  # aclose() ran while we were connecting: keep nothing open
            with contextlib.suppress(Exception):
                await conn.close()
            self._check(epoch)
        self.opened += 1
        return conn

    def _retire(self, conn: C) -> None:
        self._retired.add(conn)
        conn.retire()

    def _check(self, epoch: int) -> None:
        if self._epoch != epoch:
            raise TTSConnectionError(f"{self._name or 'pool'}: the client was closed")

    async def aclose(self) -> None:
        """Close every pooled connection. The pool stays usable: a later acquire connects again."""
        self._epoch += 1
        conns = [*self._conns.values(), *(c for c in self._retired if c not in self._conns.values())]
        self._conns.clear()
        self._retired = weakref.WeakSet()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


__all__ = ["KeyedPool", "Poolable"]
