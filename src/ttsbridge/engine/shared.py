"""What instances with the same settings share on one event loop: one pool per endpoint, key and settings,
however many ``TTS`` / service instances hold it (as aiohttp sessions share connections).

A :class:`LoopShare` is what one instance holds (its seam into the provider): ``get()`` returns the shared
resource of the *running* loop, made by ``make()`` the first time any holder with the same ``key`` asks for it
on that loop, and leased (a reference counted) for this holder. Resources never cross event loops: a
process that runs two jobs on two loops (LiveKit's THREAD executor) makes one per loop, and an instance built
where no loop runs yet (LiveKit's ``prewarm_fnc``, import time, a Pipecat ``ServiceSwitcher`` built before its
pipeline) leases nothing until it is used in one.

Closing: ``await share.aclose()`` releases the holder's leases and the holder stays closed (``get()`` raises,
:meth:`LoopShare.peek` answers None: nothing reopens). A resource is closed (``close(resource)``, awaited on
its own loop) when its last lease goes, so closing one instance closes only what no other instance uses. A
holder dropped without ``aclose()`` releases its leases when it is collected. :func:`close_loop` closes every
resource of the running loop at once (a LiveKit job's end: its loop's connections are the job's), whoever
holds them; a holder that is used again on that loop leases a new one.

Every close runs in a task held here until it is over (never a weakly held task).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

from ttsbridge.errors import TTSConnectionError

__all__ = ["LoopShare", "close_loop", "settings_key", "shared_count"]

logger = logging.getLogger("ttsbridge.engine")

R = TypeVar("R")

#: Bound on closing one loop's resources (each close is bounded on its own; this is the backstop).
CLOSE_BOUND = 10.0

_lock = threading.Lock()  # the registry is read and written from every loop's thread
_registry: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, _Entry[Any]]] = (
    weakref.WeakKeyDictionary()
)
_closing: set[asyncio.Task[None]] = set()  # close tasks, held until done


class _Entry(Generic[R]):
    """One shared resource on one loop: its key, its holders' count, how it closes."""

    __slots__ = ("_loop", "close", "closed", "key", "refs", "resource", "task")

    def __init__(
        self,
        key: Hashable,
        resource: R,
        loop: asyncio.AbstractEventLoop,
        close: Callable[[R], Awaitable[None]],
    ) -> None:
        self.key = key
        self.resource = resource
        self._loop = weakref.ref(
            loop
        )  # (the registry is keyed by the loop weakly: an entry must not hold it)
        self.close = close
        self.refs = 0
        self.closed = False
        self.task: asyncio.Task[None] | None = None

    def __repr__(self) -> str:  # the key may hold a secret: never shown
        return f"_Entry({type(self.resource).__name__}, refs={self.refs}, closed={self.closed})"

    def _unregister(self) -> None:
        """Under ``_lock``: the entry leaves its loop's registry (a later ``get`` makes a new one)."""
        self.closed = True
        loop = self._loop()
        entries = _registry.get(loop) if loop is not None else None
        if entries is not None and entries.get(self.key) is self:
            del entries[self.key]

    def start_close(self) -> asyncio.Task[None] | None:
        """On the entry's loop: the task closing the resource (started once)."""
        loop = self._loop()
        if self.task is None and loop is not None and not loop.is_closed():
            self.task = loop.create_task(self._close(), name=f"shared-close-{type(self.resource).__name__}")
            _closing.add(self.task)
            self.task.add_done_callback(_closing.discard)
        return self.task

    async def _close(self) -> None:
        try:
            await self.close(self.resource)
        except Exception as exc:
            logger.debug("closing a shared %s failed: %r", type(self.resource).__name__, exc)

    def release(self) -> asyncio.Task[None] | None:
        """Drop one lease, from any thread; the last one closes the resource on its loop. Returns the close
        task when this call started it on the running loop (the caller may await it)."""
        loop = self._loop()
        with _lock:
            if self.closed:
                return self.task if loop is not None and _on_loop(loop) else None
            self.refs -= 1
            if self.refs > 0:
                return None
            self._unregister()
        if loop is None:  # that loop is gone: nothing of it can be reached
            return None
        if _on_loop(loop):
            return self.start_close()
        with contextlib.suppress(RuntimeError):  # that loop is closed already
            loop.call_soon_threadsafe(self.start_close)
        return None


def _on_loop(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _release_all(leases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[Any]]) -> None:
    """A holder collected without ``aclose()``: its leases go (closes scheduled on their loops)."""
    for entry in list(leases.values()):
        entry.release()
    leases.clear()


class LoopShare(Generic[R]):
    """One holder's leases on the resource shared under ``key``, one per event loop it ran on.

    Args:
        key: what makes two holders share (the endpoint, the key, every setting a connection is made with).
            Kept in memory only: never logged or shown (it may hold the API key).
        make: builds the resource (called on the loop it is for, with no await: it must not do I/O).
        close: closes it (awaited on its loop, once, when its last lease goes or the loop's job ends).
        name: for error texts (``"nineninesix"``).
    """

    def __init__(
        self, key: Hashable, make: Callable[[], R], close: Callable[[R], Awaitable[None]], *, name: str = ""
    ) -> None:
        self._key = key
        self._make = make
        self._close = close
        self._name = name or "shared"
        self._leases: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Entry[R]] = (
            weakref.WeakKeyDictionary()
        )
        self._last: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, R] = weakref.WeakKeyDictionary()
        self._closed = False
        self._finalizer = weakref.finalize(self, _release_all, self._leases)

    def __repr__(self) -> str:
        return f"LoopShare({self._name}, loops={len(self._leases)}, closed={self._closed})"

    @property
    def closed(self) -> bool:
        return self._closed

    def get(self) -> R:
        """The running loop's shared resource (leased for this holder on first use). Raises
        :class:`TTSConnectionError` once closed, and ``RuntimeError`` with no running loop."""
        if self._closed:
            raise TTSConnectionError(f"{self._name}: closed", retryable=False)
        loop = asyncio.get_running_loop()
        entry = self._leases.get(loop)
        if entry is not None and not entry.closed:
            return entry.resource
        with _lock:
            entries = _registry.setdefault(loop, {})
            found = entries.get(self._key)
            if found is None or found.closed:
                found = entries[self._key] = _Entry(self._key, self._make(), loop, self._close)
            found.refs += 1
        self._leases[loop] = found
        self._last[loop] = found.resource
        return found.resource

    def peek(self) -> R | None:
        """The running loop's resource if this holder leased it (and it is open); None otherwise (no loop,
        closed, not used on this loop yet)."""
        if self._closed:
            return None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        entry = self._leases.get(loop)
        return entry.resource if entry is not None and not entry.closed else None

    def last(self) -> R | None:
        """For diagnostics and tests: the resource this holder last leased on the running loop, even once
        released or closed (never leases; None with no loop or none leased)."""
        try:
            return self._last.get(asyncio.get_running_loop())
        except RuntimeError:
            return None

    def current(self) -> R:
        """:meth:`get` while open; once closed, :meth:`last` (for diagnostics: counters, connections) when this
        holder leased one on this loop, else :meth:`get`'s error."""
        if self._closed:
            last = self.last()
            if last is not None:
                return last
        return self.get()

    async def aclose(self) -> None:
        """Release every lease (idempotent): the running loop's resource is closed now if no other holder
        uses it (awaited, bounded), other loops' on their own loop. Nothing reopens afterwards."""
        self._closed = True
        self._finalizer.detach()
        await self.release()

    async def release(self) -> None:
        """Release every lease as :meth:`aclose` does, but stay usable: a later :meth:`get` leases again."""
        leases = list(self._leases.values())
        self._leases.clear()
        waits = [t for t in (entry.release() for entry in leases) if t is not None]
        if waits:
            await asyncio.wait(waits, timeout=CLOSE_BOUND)


def settings_key(*parts: object) -> Hashable:
    """A hashable key of settings (dicts by sorted items, unhashable values by identity)."""

    def freeze(value: object) -> Hashable:
        if isinstance(value, dict):
            return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
        if isinstance(value, (list, tuple)):
            return tuple(freeze(v) for v in value)
        try:
            hash(value)
        except TypeError:
            return ("id", id(value))
        return value  # type: ignore[return-value]

    return tuple(freeze(p) for p in parts)


def shared_count(loop: asyncio.AbstractEventLoop | None = None) -> int:
    """How many shared resources are open on ``loop`` (default: the running loop). For tests and diagnostics."""
    loop = loop or asyncio.get_running_loop()
    with _lock:
        return len(_registry.get(loop, {}))


async def close_loop() -> None:
    """Close every shared resource of the running loop, whoever holds it (a job's end), bounded. Holders that
    are used again on this loop lease new ones; holders on other loops are not touched."""
    loop = asyncio.get_running_loop()
    with _lock:
        entries = list(_registry.pop(loop, {}).values())
        for entry in entries:
            entry.closed = True
    tasks = [t for t in (entry.start_close() for entry in entries) if t is not None]
    if tasks:
        await asyncio.wait(tasks, timeout=CLOSE_BOUND)
