"""The two ways a provider's turns get their connections, written once over the pool
(:mod:`ttsbridge.engine.pool`): a provider picks one and gives it a protocol factory and its
:class:`~ttsbridge.engine.settings.ConnectionSettings`.

- :class:`SharedDialer`: every turn with the same key shares one connection, reused across turns, replaced
  when unusable or expired (Nineninesix: keyed by output format, which the API fixes per connection; Chirp:
  one key). Connects awaited, within the turn's own timeout.
- :class:`StandbyDialer`: one turn per connection (Kitta v2: one generation per socket). Each attempt gets a
  fresh connection that connects in the background (the turn's frames wait in its protocol); with
  ``standby=True`` a turn's first attempt takes a warm connection kept ready in the background (open, and the
  server owes it nothing: Kitta's ``authenticated`` came, no session started), replaced once the turn that
  took it has its first audio (so its handshake never competes with that turn), retired by ``max_age`` while
  unused, and after failures re-opened with a backoff. After a turn fails with a retryable error and is not
  retried, the next turn's first request is held for ``hold`` (:meth:`StandbyDialer.take_hold`): a turn
  opened right after a failure is a retry, a framework's loop or a caller's.

Both are the :class:`~ttsbridge.engine.link.Dialer` of the provider's turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
import weakref
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.connection import Connection
from ttsbridge.engine.events import ConnectionFailed, Event, TurnDone, TurnEvent, TurnFailed
from ttsbridge.engine.link import Link
from ttsbridge.engine.pool import KeyedPool
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.errors import TTSConnectionError, TTSTimeoutError

__all__ = ["STANDBY_BACKOFF", "SharedDialer", "StandbyDialer"]

logger = logging.getLogger("ttsbridge.engine")

K = TypeVar("K", bound=Hashable)

#: Between failed standby connections: 0.5 s, doubling, at most 30 s (no jitter: one standby per provider).
STANDBY_BACKOFF = Backoff(base=0.5, factor=2.0, cap=30.0, floor=1.0)
_STANDBY = "standby"  # the standby pool's one key: a standby carries no request, so it serves any turn


def _log_failed(name: str, conn: Connection, ev: ConnectionFailed) -> None:
    if conn.sinks or not isinstance(ev.error, TTSConnectionError):
        logger.warning("%s: connection %s failed: %s", name, conn.name, ev.error)
    else:
        logger.debug("%s: idle connection %s closed: %s", name, conn.name, ev.error)


class SharedDialer(Generic[K]):
    """Turns share one connection per key: ``key(request)`` names it, ``make_protocol(key)`` makes the
    protocol of a new one."""

    def __init__(
        self,
        make_protocol: Callable[[K], TurnProtocol],
        settings: ConnectionSettings,
        *,
        key: Callable[[Any], K],
        name: str,
    ) -> None:
        self._make_protocol = make_protocol
        self._key = key
        self.settings = settings
        self.name = name
        self.pool: KeyedPool[K, Connection] = KeyedPool(self._connect, shared=True, name=name)
        self._serial = 0
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def opened(self) -> int:
        """Connections opened so far."""
        return self.pool.opened

    def connection(self, key: K) -> Connection | None:
        """The pooled connection for ``key`` (None: none yet, or it failed)."""
        return self.pool.get(key)

    async def dial(
        self, turn_id: str, request: Any, *, retry: bool, timeout: float | None = None
    ) -> tuple[Link, bool]:
        """The pooled connection for the request's key (a retry's too: the same socket while it is usable),
        and whether it was already open."""
        if self._closed:
            raise TTSConnectionError(f"{self.name}: the provider is closed", retryable=False)
        opened = self.pool.opened
        conn = await self.pool.acquire(self._key(request), timeout)
        return conn, self.pool.opened == opened

    def hang_up(self, link: Link, end: TurnEvent) -> None:
        """A shared connection outlives its turns (the pool replaces or closes it)."""

    async def prewarm(self, key: K) -> Connection | None:
        """Open (or refresh) the connection for ``key`` ahead of the first turn (None: closed, nothing opens)."""
        if self._closed:
            return None
        return await self.pool.acquire(key)

    async def _connect(self, key: K, timeout: float | None) -> Connection:
        self._serial += 1
        conn = Connection(self._make_protocol(key), self.settings, name=f"{self.name}-{self._serial}")
        conn.on_event = lambda ev: self._on_event(key, conn, ev)
        await conn.connect(timeout)
        return conn

    def _on_event(self, key: K, conn: Connection, ev: Event) -> None:
        # The ends of turns their owner let go (a late cancel acknowledgement) need nothing: the protocol
        # dropped them already. A failed connection leaves the pool.
        if isinstance(ev, ConnectionFailed):
            _log_failed(self.name, conn, ev)
            self.pool.discard(key, conn)

    async def aclose(self) -> None:
        """Close every connection (their turns fail with a connection error). Closed for good: a turn still
        holding the dialer (a retry) fails instead of opening a connection nobody would close."""
        self._closed = True
        await self.pool.aclose()


class StandbyDialer:
    """One turn per connection; ``make_protocol(label)`` makes the protocol of a new one (``label`` names it
    in logs until a turn opens on it). See the module docstring.

    Args:
        standby: keep a warm connection for the next turn.
        replace_delay_max: the replacement of a taken standby starts at the first audio of the turn that took
            it, at the latest after this long.
        hold: the backoff whose first delay holds the next turn's first request after a retryable failure
            that was not retried (None: no hold).
        backoff: between failed standby connections.
    """

    def __init__(
        self,
        make_protocol: Callable[[str], TurnProtocol],
        settings: ConnectionSettings,
        *,
        name: str,
        standby: bool = True,
        replace_delay_max: float = 1.0,
        hold: Backoff | None = None,
        backoff: Backoff = STANDBY_BACKOFF,
    ) -> None:
        self._make_protocol = make_protocol
        self.settings = settings
        self.name = name
        self.standby_enabled = standby
        self.replace_delay_max = replace_delay_max
        self._hold = hold
        self.backoff = backoff
        self.pool: KeyedPool[str, Connection] = KeyedPool(self._open_standby, shared=False, name=name)
        self._connections: weakref.WeakSet[Connection] = weakref.WeakSet()  # closed with the dialer
        self._closing: set[asyncio.Task[None]] = set()
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._gate: Connection | None = None  # a taken standby: its first audio starts the replacement
        self._hold_until = 0.0
        self._closed = False
        #: Counters for diagnostics and tests.
        self.hits = self.misses = self.retired = self.created = 0

    @property
    def standby(self) -> Connection | None:
        """The warm connection, if one is kept now."""
        return self.pool.get(_STANDBY)

    @property
    def closed(self) -> bool:
        return self._closed

    def take_hold(self) -> float | None:
        """When the next turn's first request may go out (loop time; None: at once), taken: the hold applies to
        one turn."""
        at, self._hold_until = self._hold_until, 0.0
        return at or None

    # --- the turns' dialer --------------------------------------------------------------------------------

    async def dial(
        self, turn_id: str, request: Any, *, retry: bool, timeout: float | None = None
    ) -> tuple[Link, bool]:
        """The warm standby for a turn's first attempt when there is one, else a new connection (a retry
        always), connecting in the background within the turn's ``timeout``."""
        if self._closed:
            raise TTSConnectionError(f"{self.name}: the provider is closed", retryable=False)
        if not retry and self.standby_enabled:
            self._ensure_loop()
            conn = self._take()
            if conn is not None:
                self.hits += 1
                self._gate = conn
                conn.start(timeout)  # (still connecting: the turn's own bound holds for it too)
                return conn, True
            self.misses += 1
        conn = self._new(turn_id)
        conn.start(timeout)
        return conn, False

    def hang_up(self, link: Link, end: TurnEvent) -> None:
        """The turn's connection closes itself once its protocol is over; here only the hold is decided: a
        retryable failure that was not retried holds the next turn's first request, a completed turn lifts
        the hold."""
        if isinstance(end, TurnFailed):
            if end.retry is None and end.error.retryable and self._hold is not None:
                at = link.now() + self._hold.delay(1, getattr(end.error, "retry_after", None) or None)
                self._hold_until = max(self._hold_until, at)
        elif isinstance(end, TurnDone) and not end.cancelled:
            self._hold_until = 0.0

    async def prewarm(self) -> None:
        """Open the standby (if enabled) and wait until it is warm; raises its error if it fails."""
        if not self.standby_enabled or self._closed:
            return
        conn = self.pool.get(_STANDBY)
        if conn is not None and not conn.usable():
            self.pool.discard(_STANDBY, conn)
        conn = await self.pool.prefill(_STANDBY)
        self._ensure_loop()
        await conn.wait_open()
        bound = self.settings.connect_timeout
        if not await conn.wait_until(lambda: conn.quiet, bound):
            if conn.closed:
                raise conn.error or TTSConnectionError(f"{self.name}: the standby closed before it was ready")
            self._retire("not ready in time")
            raise TTSTimeoutError(f"{self.name}: the standby connection was not ready within {bound:g} s")

    # --- connections --------------------------------------------------------------------------------------

    def _new(self, label: str) -> Connection:
        conn = Connection(self._make_protocol(label), self.settings, name=f"{self.name}-{label}")
        conn.on_event = lambda ev: self._on_event(conn, ev)
        self._connections.add(conn)
        return conn

    def _on_event(self, conn: Connection, ev: Event) -> None:
        if isinstance(ev, ConnectionFailed):
            if conn is self.pool.get(_STANDBY):
                logger.debug("%s: standby %s ended: %s", self.name, conn.name, ev.error)
            self._kick()

    async def _open_standby(self, _key: str, _timeout: float | None) -> Connection:
        """The pool's factory: a connection that connects in the background."""
        conn = self._new(f"standby-{uuid.uuid4().hex[:12]}")  # (the label is never sent)
        conn.start()
        self.created += 1
        return conn

    def _take(self) -> Connection | None:
        """The warm connection, if usable (any turn can take it: its request is sent once it is taken)."""
        conn = self.pool.get(_STANDBY)
        if conn is None:
            return None
        if not conn.usable():
            self.pool.discard(_STANDBY, conn)
            self._kick()
            return None
        max_age = self.settings.max_age
        if max_age is not None and conn.age >= max_age:
            self._retire("max age")
            return None
        if conn.keepalive.checking:
            # A keepalive ping is out and unanswered: maybe dead. The turn connects on its own and the standby
            # is replaced (a pong still in flight would otherwise hand it, dead or not, to the next turn): a turn
            # that takes a dead standby loses its turn, one that skips a live one only pays a handshake.
            self._retire("ping unanswered")
            return None
        self.pool.take(_STANDBY)
        self._kick()  # the replacement connects once the turn has its first audio
        return conn

    def _retire(self, why: str) -> None:
        conn = self.pool.get(_STANDBY)
        if conn is not None:
            self.pool.discard(_STANDBY, conn)
            self.retired += 1
            logger.debug("%s: retiring standby %s (%s)", self.name, conn.name, why)
            task = asyncio.create_task(conn.close(), name=f"{self.name}-standby-close")
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        self._kick()

    # --- the standby loop ---------------------------------------------------------------------------------

    def _ensure_loop(self) -> None:
        if not self.standby_enabled or self._closed:
            return
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._keep_standby(), name=f"{self.name}-standby")

    def _kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _keep_standby(self) -> None:
        """Keep one warm connection: replaced after use, retired by age, backed off after failures."""
        failures = 0
        while not self._closed:
            conn = self.pool.get(_STANDBY)
            if conn is None and self._gate is not None:
                # The replacement waits for the first audio of the turn that took the standby (or its end), so
                # our handshake never competes with that turn's critical path; bounded.
                gate, self._gate = self._gate, None
                await gate.wait_until(lambda g=gate: g.audio_at is not None, self.replace_delay_max)  # type: ignore[misc]
                continue
            if conn is not None and not conn.usable():
                self.pool.discard(_STANDBY, conn)  # failed (auth, network...): turns connect on their own
                failures += 1
                delay = self.backoff.delay(failures)
                logger.warning(
                    "%s: standby connection failed (%s); next attempt in %.1f s", self.name, conn.error, delay
                )
                await self._sleep(delay)
                continue
            if conn is None:
                try:
                    conn = await self.pool.prefill(_STANDBY)
                except Exception as exc:
                    logger.warning(
                        "%s: cannot open a standby connection (%s); standby stopped", self.name, exc
                    )
                    return
            if not conn.quiet:
                # Still connecting (or the server still owes it its greeting): its age counts once it is warm,
                # so a slow handshake under load is not retired before it ever served; bounded by the connect
                # timeout and the protocol's own deadlines, which fail it.
                await conn.wait_until(lambda c=conn: c.quiet, self.settings.connect_timeout)  # type: ignore[misc]
                continue
            failures = 0
            if conn.expired():
                self._retire("max age")
                continue
            max_age = self.settings.max_age
            # wakes on: taken by a turn, failed, closed; or at its max age
            await self._sleep(None if max_age is None else max_age - conn.age)

    async def _sleep(self, delay: float | None) -> None:
        assert self._wake is not None
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), None if delay is None else max(0.0, delay))

    async def aclose(self) -> None:
        """Stop the standby, close every connection; a turn on one fails (not retried)."""
        self._closed = True
        self._kick()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5.0)
        await self.pool.aclose()
        err = TTSConnectionError(f"{self.name}: the provider was closed", retryable=False)
        conns = list(self._connections)  # (closing ones too: their close is awaited, bounded)
        if conns:
            await asyncio.gather(*(c.close(err) for c in conns), return_exceptions=True)
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=5.0)
