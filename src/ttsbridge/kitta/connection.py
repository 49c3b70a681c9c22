"""One Kitta WebSocket connection (= one server session) on the engine's :class:`~ttsbridge.engine.Connection`:
the :class:`~ttsbridge.engine.turn.Link` a Kitta turn's attempt runs on.

:class:`KittaConnection` holds no turn state: it connects in a background task (text sent before the socket
is up waits in the protocol), writes and dispatches through the engine's connection, and asks its
:class:`~ttsbridge.kitta.protocol.KittaProtocol` everything else (as websockets' ``Connection.state`` returns
``self.protocol.state``). Once the protocol knows the outcome (finish, error, protocol error, timeout, close)
the task finishes the close in the background, bounded, and the connection lets go of its socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from websockets.asyncio.client import ClientConnection

from ttsbridge.engine.connection import Connection
from ttsbridge.engine.events import ConnectionFailed, Event, TurnEvent
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSTimeoutError
from ttsbridge.kitta.protocol import KittaProtocol, State

__all__ = ["ConnectSettings", "KittaConnection"]

log = logging.getLogger("ttsbridge.kitta")

#: Kitta audio frames can be large (a whole segment of WAV at once).
MAX_FRAME: int = 16 * 2**20


@dataclass(frozen=True)
class ConnectSettings:
    """The client's connection knobs (see :class:`~ttsbridge.kitta.client.KittaClient`)."""

    connect_timeout: float = 10.0
    close_timeout: float = 2.0
    ping_interval: float | None = 5.0
    ping_after_silence: float | None = None
    pong_timeout: float = 1.5
    proxy: str | bool | None = True
    #: The TLS context for ``wss://`` (None: the shared verifying one, engine/tls.py).
    ssl: ssl.SSLContext | None = None


class KittaConnection:
    """One WebSocket connection = one Kitta session. Starts connecting at construction (needs a running loop).

    :attr:`authenticated` and :attr:`ready` are set when the server says so, and when the session ends.
    ``closed`` tells whether its client is closed (then it does not connect); ``on_release`` is called once
    its task is over."""

    def __init__(
        self,
        settings: ConnectSettings,
        proto: KittaProtocol,
        *,
        closed: Callable[[], bool] = lambda: False,
        on_release: Callable[[KittaConnection], None] | None = None,
    ) -> None:
        self.settings = settings
        self.proto = proto
        self._client_closed = closed
        self._on_release = on_release
        self._loop = asyncio.get_running_loop()
        self.created_at = self._loop.time()
        extra: dict[str, object] = {} if settings.proxy is True else {"proxy": settings.proxy or None}
        if settings.ssl is not None:
            extra["ssl"] = settings.ssl
        self.connection: Connection | None = Connection(
            proto,
            on_event=self._on_event,
            on_receive=self._progress,
            connect_timeout=settings.connect_timeout,
            close_timeout=settings.close_timeout,
            ping_interval=settings.ping_interval,
            ping_after_silence=settings.ping_after_silence,
            pong_timeout=settings.pong_timeout,
            max_size=MAX_FRAME,
            name=f"kitta-{proto.request_id}",
            connect_options=extra,
        )
        self.authenticated = asyncio.Event()
        self.ready = asyncio.Event()
        self._over = asyncio.Event()  # the outcome is known: the task closes the socket
        #: When the outcome became known (loop time).
        self.ended_at: float | None = None
        self._closing = False
        #: Set by a pool: the age after which an unused connection should be replaced.
        self.max_age: float | None = None
        self._task = asyncio.create_task(self._run(), name=f"kitta-session-{proto.request_id}")

    def __repr__(self) -> str:
        state = self.proto.state.value
        return f"KittaConnection(request_id={self.request_id!r}, state={state}, ended={self.ended})"

    # --------------------------------------------------------------------------------------------- queries

    @property
    def request_id(self) -> str:
        return self.proto.request_id

    @property
    def age(self) -> float:
        return self._loop.time() - self.created_at

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def alive(self) -> bool:
        """Not ended and not failed/closed (it may still be connecting)."""
        return not self.ended and not self.proto.terminal and not self._closing

    def usable(self) -> bool:
        """For the engine's pool: may still carry a turn (connecting or authenticated, nothing started)."""
        return self.alive and self.proto.deferred

    @property
    def suspect(self) -> bool:
        """A liveness ping is out and unanswered (the engine's :attr:`Connection.checking`): not to be taken.
        Stricter than a shared connection's :attr:`Connection.suspect`: a turn that takes a dead standby loses
        its turn (its ``start`` is uncertain), one that skips a live one only pays a handshake."""
        return self.connection is not None and self.connection.checking

    def expired(self) -> bool:
        """For the engine's pool: warm (authenticated) and older than :attr:`max_age`. A connection still
        connecting is not retired by age: under load it would be closed before it ever served."""
        return self.max_age is not None and self.authenticated.is_set() and self.age >= self.max_age

    @property
    def error(self) -> TTSBridgeError | None:
        return self.proto.error

    @property
    def ws(self) -> ClientConnection | None:
        """The socket while the session holds one (None before it connected and after it closed)."""
        return self.connection.ws if self.connection is not None else None

    @property
    def task(self) -> asyncio.Task[None]:
        return self._task

    # ------------------------------------------------------------------------------- the link of a turn

    @property
    def protocol(self) -> KittaProtocol:
        return self.proto

    def now(self) -> float:
        return self._loop.time()

    def attach(self, turn_id: str, sink: Callable[[TurnEvent], None]) -> None:
        """Deliver the events of this connection's turn to ``sink`` (the turn's)."""
        if self.connection is not None:
            self.connection.attach(turn_id, sink)
            self._task.set_name(f"kitta-session-{turn_id}")

    def detach(self, turn_id: str) -> None:
        if self.connection is not None:
            self.connection.detach(turn_id)

    async def flush(self, timeout: float | None = None) -> None:
        """After a command: dispatch its events and write what the protocol allows now (frames queued before
        the socket is up are written once it is). Never raises: a loss is the protocol's to report."""
        conn = self.connection
        if conn is None or (conn.ws is None and self.proto.has_data_to_send()):
            return
        with contextlib.suppress(TTSConnectionError):  # lost while writing: the protocol was told
            await conn.flush(timeout)
        self._progress()

    async def abort(self, error: TTSBridgeError) -> None:
        """Fail the turn on it with ``error`` (the client shuts down: no retry), then close."""
        self.proto.abort(error, self._loop.time())
        await self.flush()
        await self.close(1000, "client closed")

    # ------------------------------------------------------------------------------------------------ life

    def _progress(self) -> None:
        proto = self.proto
        if proto.state is not State.CONNECTING:
            self.authenticated.set()
        if proto.is_ready:
            self.ready.set()
        if proto.terminal:
            self._over.set()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, ConnectionFailed):
            self._over.set()

    async def _run(self) -> None:
        try:
            if not self.proto.terminal and await self._connect():
                log.debug("kitta %s: connected (auth=%s)", self.request_id, self.proto.auth)
                await self.flush()
                await self._over.wait()
        finally:
            await self.flush()
            self._end()
            conn = self.connection
            if conn is not None:
                await conn.close()  # bounded: keeps reading until the close completes, then aborts
            self._release()

    async def _connect(self) -> bool:
        conn = self.connection
        assert conn is not None
        if self._client_closed():
            self.proto.fail_connect(
                TTSConnectionError("kitta: client is closed", retryable=False), self._now()
            )
            return False
        try:
            await conn.connect()
        except TTSBridgeError as exc:
            self.proto.fail_connect(exc, self._now())
            return False
        assert conn.ws is not None
        err = self.proto.subprotocol_error(conn.ws.subprotocol)
        if err is not None:
            self.proto.fail_connect(err, self._now())
            return False
        return not self.proto.terminal  # closed while connecting: the finally closes the socket

    def _now(self) -> float:
        return self._loop.time()

    def _end(self) -> None:
        """The outcome is known: record when, and wake every waiter."""
        if self.ended_at is not None:
            return
        self.ended_at = self._loop.time()
        if self.proto.error is not None:
            log.debug("kitta %s: session ended: %s", self.request_id, self.proto.error)
        self.authenticated.set()
        self.ready.set()
        self._over.set()

    def _release(self) -> None:
        """The task is over: the socket (and the connection holding it) goes."""
        self.connection = None
        if self._on_release is not None:
            self._on_release(self)

    async def wait_ready(self, timeout: float) -> None:
        """Until ``ready``; raises the session's error, or :class:`TTSTimeoutError` (and closes)."""
        await self._wait_for(self.ready, "ready", "ready timeout", timeout)
        if not self.proto.is_ready:
            raise self.error or TTSConnectionError("kitta: session closed before 'ready'")

    async def wait_authenticated(self, timeout: float) -> None:
        """Until ``authenticated`` (a warm connection); raises the session's error, or a timeout."""
        await self._wait_for(self.authenticated, "authenticated", "authentication timeout", timeout)
        if not self.alive:
            raise self.error or TTSConnectionError("kitta: connection closed before 'authenticated'")

    async def _wait_for(self, event: asyncio.Event, name: str, reason: str, timeout: float) -> None:
        """Until ``event`` is set, at most ``timeout``; on timeout the session is closed (1000, ``reason``) and
        :class:`TTSTimeoutError` names the event that did not come."""
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except asyncio.TimeoutError:
            await self.close(1000, reason)
            raise TTSTimeoutError(f"kitta: no {name!r} within {timeout:g} s") from None

    async def close(self, code: int = 1000, reason: str = "", *, wait: bool = True) -> None:
        """Close the session: nothing more is sent or delivered (a turn on it ends cancelled). Idempotent.

        The close itself completes in the session's task, bounded; ``wait=False`` returns without waiting
        for it once the socket is up (a session still connecting is stopped and waited for)."""
        self._closing = True
        self.proto.close(reason or "closed")
        await self.flush()
        self._over.set()
        task = self._task
        if not task.done() and self.ws is None:
            task.cancel()  # not connected yet (handshaking, or a retry waiting for its time)
        if not task.done() and (wait or self.ws is None):
            done, _ = await asyncio.wait({task}, timeout=self.settings.close_timeout + 2.0)
            if not done:
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        if task.done() and not task.cancelled():
            task.exception()  # retrieved: never "exception was never retrieved"
        self._end()  # a task cancelled before its first step never ran its finally
        if task.done():
            self._release()
