"""Kitta's warm standby: one connection kept connected and authenticated, its ``start`` held, so that a turn
pays no handshake. One :class:`Standby` per client (endpoint, key, knobs) per event loop, shared by every
provider with those settings there (:mod:`ttsbridge.engine.shared`): five agents after five handoffs, or two
services behind a ``ServiceSwitcher``, keep one standby between them, not five.

The standby holds no ``start``, so it serves any options (the turn that takes it sends its own); an idle
one is replaced once it is ``max_age`` old (below the server's idle timeout), and the replacement of a used
one is started once the turn that took it has its first audio (or after ``replace_delay_max``). Nothing is
ever started while idle. Every task here (the keeper loop, the closes) is held until it is over and
cancelled by :meth:`Standby.aclose`; after it nothing reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from ttsbridge.engine.pool import KeyedPool
from ttsbridge.kitta.client import KittaClient
from ttsbridge.kitta.connection import KittaConnection
from ttsbridge.kitta.models import KittaOptions

__all__ = ["Standby", "spawn_close"]

log = logging.getLogger("ttsbridge.kitta")

_KEY = "standby"  # the pool's one key: the standby holds no start, so it serves any options


def spawn_close(session: KittaConnection, reason: str, tasks: set[asyncio.Task[None]]) -> None:
    """Close ``session`` (1000) in a task held in ``tasks`` until it is over."""
    wait = reason != "cancelled"  # (a cancelled turn's close completes in the session's task)
    task = asyncio.get_running_loop().create_task(
        session.close(1000, reason, wait=wait), name="kitta-session-close"
    )
    tasks.add(task)
    task.add_done_callback(tasks.discard)


class Standby:
    """The warm connection of one client on one loop (see the module doc).

    Args:
        client: makes the connections; closed by :meth:`aclose` when ``own_client``.
        options: a start request for the standby's protocol (held, never sent: a turn sends its own).
        enabled: keep a standby at all (off: :meth:`take` always answers None).
        max_age / replace_delay_max: see :class:`~ttsbridge.kitta.provider.KittaTurnProvider`.
    """

    def __init__(
        self,
        client: KittaClient,
        options: KittaOptions,
        *,
        enabled: bool,
        max_age: float,
        replace_delay_max: float,
        own_client: bool = True,
    ) -> None:
        self.client = client
        self.options = options
        self.enabled = enabled
        self.max_age = max_age
        self.replace_delay_max = replace_delay_max
        self._own_client = own_client
        #: The warm connection lives in an exclusive pool (one generation per socket): taken by a turn, refilled.
        self._pool: KeyedPool[str, KittaConnection] = KeyedPool(self._open, shared=False, name="kitta")
        self._replace_gate: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self.closed = False
        #: Counters for diagnostics and tests.
        self.retired = 0
        self.created = 0

    def __repr__(self) -> str:
        return f"Standby({self.client!r}, enabled={self.enabled}, closed={self.closed})"

    @property
    def session(self) -> KittaConnection | None:
        return self._pool.get(_KEY)

    def gate(self, event: asyncio.Event) -> None:
        """Build the replacement of the standby a turn just took once ``event`` is set (its first audio)."""
        self._replace_gate = event

    def ensure_running(self) -> None:
        if not self.enabled or self.closed:
            return
        if self._wake is None:
            self._wake = asyncio.Event()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._keep(), name="kitta-standby")

    def kick(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _retire(self, why: str) -> None:
        session = self._pool.get(_KEY)
        if session is not None:
            self._pool.discard(_KEY, session)
            self.retired += 1
            log.debug("kitta: retiring standby %s (%s)", session.request_id, why)
            spawn_close(session, "standby retired", self._closing)
        self.kick()

    async def _keep(self) -> None:
        """Keep one warm connection (authenticated, nothing started). Replaced after use, retired by age,
        backed off after failures."""
        assert self._wake is not None
        failures = 0
        while not self.closed:
            session = self._pool.get(_KEY)
            if session is None and self._replace_gate is not None:
                # Build the replacement once the turn that took the standby has its first audio (or ended),
                # so that our handshake never competes with that turn's critical path; bounded.
                gate, self._replace_gate = self._replace_gate, None
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(gate.wait(), self.replace_delay_max)
                continue
            if session is not None and not session.usable():
                # failed (auth, network...): back off before the next one; turns connect on their own
                self._pool.discard(_KEY, session)
                failures += 1
                delay = min(30.0, 0.5 * 2 ** (failures - 1))
                log.warning("kitta: standby session failed (%s); next attempt in %.1f s", session.error, delay)
                await self._sleep(delay)
                continue
            if session is None:
                try:
                    session = await self._pool.prefill(_KEY)
                except Exception as exc:  # e.g. a shared client closed under us: stop keeping a standby
                    log.warning("kitta: cannot open a standby session (%s); standby stopped", exc)
                    return
            if not session.authenticated.is_set():
                # Still connecting: its age starts to count once it is warm (a slow handshake under load
                # must not be retired before it ever served); the connect and auth timeouts bound the wait.
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(session.authenticated.wait(), self.auth_bound())  # set on end too
                continue
            failures = 0
            if session.expired():
                self._retire("max age")
                continue
            # wakes on: taken by a turn, session ended, aclose, options changed; or at max age
            await self._sleep(self.max_age - session.age)

    async def _sleep(self, delay: float) -> None:
        assert self._wake is not None
        self._wake.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), max(0.0, delay))

    async def _open(self, _key: str) -> KittaConnection:
        """The pool's factory: a connection that connects and authenticates in the background."""
        session = self.client.preconnect(self.options)
        session.max_age = self.max_age
        session.task.add_done_callback(lambda _t: self.kick())
        self.created += 1
        return session

    def take(self) -> KittaConnection | None:
        """The warm connection, if usable (``start`` carries the turn's options); the loop starts keeping one."""
        if not self.enabled or self.closed:
            return None
        self.ensure_running()
        session = self._pool.get(_KEY)
        if session is None:
            return None
        if not session.usable():
            self._pool.discard(_KEY, session)
            self.kick()
            return None
        if session.age >= self.max_age:
            self._retire("max age")
            return None
        if session.suspect:
            # A keepalive ping is out and unanswered: maybe dead. The turn connects on its own and the standby
            # is replaced (a pong still in flight would otherwise hand it, dead or not, to the next turn).
            self._retire("ping unanswered")
            return None
        self._pool.discard(_KEY, session)
        self.kick()  # the replacement connects once the turn has its first audio
        return session

    async def prewarm(self) -> None:
        """Connect the standby and wait until it is authenticated (one, however many callers); raises its
        error if it fails. Does nothing when disabled or closed."""
        if not self.enabled or self.closed:
            return
        session = self._pool.get(_KEY)
        if session is not None and not session.alive:
            self._pool.discard(_KEY, session)
        session = await self._pool.prefill(_KEY)
        self.ensure_running()
        await session.wait_authenticated(self.auth_bound())

    def auth_bound(self) -> float:
        return self.client.connect_timeout + self.client.event_timeout

    async def aclose(self) -> None:
        """Stop keeping a standby and close it (1000); with its own client, close every connection the client
        made. Idempotent; nothing reconnects afterwards."""
        self.closed = True
        self.kick()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(task, 5.0)
        await self._pool.aclose()
        if self._own_client:
            await self.client.aclose()
        if self._closing:
            await asyncio.wait(set(self._closing), timeout=5.0)
