"""Connection pooling, keyed (modelled on httpcore's ``connection_pool.py`` and LiveKit's ``ConnectionPool``).

One :class:`KeyedPool` per client. ``shared=True`` (Nineninesix: every turn with the same output format shares
one socket): :meth:`acquire` returns the pooled connection for the key, replacing it when it is no longer
usable or has expired. ``shared=False`` (Kitta: one generation per socket): :meth:`acquire` takes the standby
connection out of the pool (or opens one), and :meth:`prefill` opens the next standby ahead of time.

The pool decides nothing about a connection itself: it asks the connection (:class:`Poolable`). A shared
connection that is no longer usable (closing, or suspect: a liveness ping is out after a silence or a timeout)
is replaced and *retired* (``retire()``, when it has one): it takes no new turn and closes itself once the turns
still on it are over; ``aclose()`` closes retired connections too.
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
        """Open, and able to carry a new turn now."""

    def expired(self) -> bool:
        """Should be replaced before the next turn (idle too long, with no turn on it)."""

    async def close(self) -> None: ...


K = TypeVar("K", bound=Hashable)
C = TypeVar("C", bound=Poolable)


class KeyedPool(Generic[K, C]):
    """Connections by key; ``factory(key)`` opens (connects) a new one."""

    def __init__(self, factory: Callable[[K], Awaitable[C]], *, shared: bool = True, name: str = "") -> None:
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

    async def acquire(self, key: K) -> C:
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
                conn = await self._open(key, epoch)
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
            conn = self._conns[key] = await self._open(key, epoch)
            return conn

    async def _open(self, key: K, epoch: int) -> C:
        conn = await self._factory(key)
        if self._epoch != epoch:  # aclose() ran while we were connecting: keep nothing open
            with contextlib.suppress(Exception):
                await conn.close()
            self._check(epoch)
        self.opened += 1
        return conn

    def _retire(self, conn: C) -> None:
        retire = getattr(conn, "retire", None)
        if retire is not None:
            self._retired.add(conn)
            retire()

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
