"""The one connection of every provider (modelled on ``websockets.asyncio.connection`` and httpcore's
protocol-neutral connection): one WebSocket driven by one :class:`~ttsbridge.engine.protocol.TurnProtocol`.

:class:`Connection` holds no turn state: it feeds every message received to ``protocol.receive``, dispatches
``protocol.events_received()`` (turn events to the sink attached for that turn, the rest to ``on_event``) and
writes ``protocol.data_to_send()``. It is the :class:`~ttsbridge.engine.link.Link` a turn's attempt runs on
and the :class:`~ttsbridge.engine.pool.Poolable` the pool keeps: it answers :meth:`~Connection.usable`,
:meth:`~Connection.expired` (``max_idle`` / ``max_age``), :meth:`~Connection.retire` and
:attr:`~Connection.age` itself. It is composed of parts, each an object with its own state:

- the socket (:class:`~ttsbridge.engine.socket.Socket`): the engine's asyncio protocol over websockets'
  public sans-I/O ``ClientProtocol``; it hands each parsed message over in ``data_received`` (no reader task);
- the inbox (:class:`~ttsbridge.engine.inbox.Inbox`): messages handled in slices, the hold after a first
  audio, high/low water pausing the transport's reading;
- the keepalive (:class:`~ttsbridge.engine.keepalive.Keepalive`): ping, pong, suspect, condemn;
- the write path (:class:`~ttsbridge.engine.writer.Writer`).

One timer follows ``protocol.next_deadline()`` and the keepalive, and calls ``protocol.tick``. It connects
awaited (:meth:`~Connection.connect`) or in the background (:meth:`~Connection.start`: a turn opens on it at
once and its frames wait in the protocol until the socket is open); either way the connect and the handshake
are bounded by one timeout, in one place (:meth:`~Connection._connect`): the turn's own when the connection is
dialled for a turn, else ``connect_timeout``. Once the protocol is closed (a turn's end on a one-turn
connection, a failure, :meth:`~Connection.close`) the socket is closed, bounded: frames keep being read (and
discarded) until the close handshake completes, then the transport is aborted after ``close_timeout``.
Connections are made without permessage-deflate: the frames are base64 audio or MessagePack, which compress
poorly (docs/benchmarks.md).

Callers drive the protocol with its commands and then ``await connection.flush()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Callable

from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
from websockets.typing import Subprotocol
from websockets.uri import parse_uri

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import redact
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnEvent
from ttsbridge.engine.inbox import HOLD, INBOX_HIGH, INBOX_LOW, SLICE, Inbox
from ttsbridge.engine.keepalive import Keepalive
from ttsbridge.engine.protocol import ConnectRequest, TurnProtocol
from ttsbridge.engine.proxy import proxy_for
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.socket import Socket
from ttsbridge.engine.tls import certificate_error, client_context
from ttsbridge.engine.transport import open_transport
from ttsbridge.engine.writer import Writer
from ttsbridge.errors import TTSBridgeError, TTSConnectionError

logger = logging.getLogger("ttsbridge.engine")

USER_AGENT = "ttsbridge/0.1"
Sink = Callable[[TurnEvent], None]

__all__ = ["HOLD", "INBOX_HIGH", "INBOX_LOW", "SLICE", "USER_AGENT", "Connection", "Sink"]


class Connection:
    """One WebSocket driven by one protocol. ``on_event`` gets :class:`ConnectionFailed` and the events of
    turns with no sink attached (e.g. the late acknowledgement of a turn its owner let go)."""

    def __init__(
        self,
        protocol: TurnProtocol,
        settings: ConnectionSettings | None = None,
        *,
        name: str = "",
        on_event: Callable[[Event], None] | None = None,
    ) -> None:
        self.protocol = protocol
        self.settings = settings = settings or ConnectionSettings()
        self.name = name or protocol.provider
        self.on_event = on_event
        self.sinks: dict[str, Sink] = {}
        self._loop = loop = asyncio.get_running_loop()
        self.created_at = loop.time()
        #: The socket, once the transport is made (its handshake may still be under way).
        self.socket: Socket | None = None
        self.keepalive = Keepalive(settings, protocol, self._send_ping, self._dead, loop.time, name=self.name)
        self.inbox = Inbox(self._handle, self._pause_reading, self._resume_reading)
        self.writer = Writer(
            protocol,
            self.keepalive,
            self._lost_on_write,
            loop.time,
            timeout=settings.write_timeout,
            name=self.name,
        )
        #: The pool replaced it: no new turn; closed once its turns are over.
        self.retired = False
        #: When this connection first dispatched a turn's audio (None: not yet).
        self.audio_at: float | None = None
        #: Why it ended: the error of its :class:`ConnectionFailed` (None while it runs).
        self.error: TTSBridgeError | None = None
        self._opening: asyncio.Task[TTSBridgeError | None] | None = None
        self._connect_from = 0.0  # when the connect started ...
        self._connect_by = 0.0  # ... and when it is over, opened or not (the one bound: see start)
        self._connect_timer: asyncio.TimerHandle | None = None
        self._overdue = False  # the bound cut the connect short
        self._open = False  # the handshake succeeded and the protocol accepted it
        self._ended = False  # the transport's end was handled
        self._lost_early = False  # it ended before the opening task saw the handshake's outcome
        self._closer: asyncio.Task[None] | None = None
        self._retiring: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._waiters: list[tuple[Callable[[], bool], asyncio.Future[None]]] = []

    def __repr__(self) -> str:
        return f"Connection({self.name})"

    # --- state: asked of the protocol and the parts ------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.protocol.closed

    @property
    def is_open(self) -> bool:
        """The handshake succeeded and the protocol accepted it (it may have closed since: :attr:`closed`)."""
        return self._open

    @property
    def connecting(self) -> bool:
        return self._opening is not None and not self._opening.done()

    @property
    def finished(self) -> bool:
        """Closed, and its socket gone (the close handshake is over, or there never was a socket)."""
        if not self.protocol.closed or self.connecting:
            return False
        return self.socket is None or self.socket.lost.done()

    @property
    def age(self) -> float:
        """Seconds since the connection was made (its connect included)."""
        return self._loop.time() - self.created_at

    @property
    def quiet(self) -> bool:
        """Open, not closed, and the server owes it nothing (a warm connection: e.g. Kitta's ``authenticated``
        came)."""
        return self._open and not self.protocol.closed and self.protocol.awaiting_since() is None

    @property
    def suspect(self) -> bool:
        """A turn timed out on it, or a ping has been unanswered a while: no new turn (see the keepalive)."""
        return self.keepalive.suspect

    def now(self) -> float:
        """The clock the protocol is driven with (the event loop's)."""
        return self._loop.time()

    def writable(self) -> bool:
        """Open and not closing: a frame sent now is written."""
        return self.writer.writable()

    def idle_for(self) -> float:
        return self._loop.time() - self.writer.last_used

    # --- Poolable ----------------------------------------------------------------------------------------

    def usable(self) -> bool:
        """Can carry a new turn now: the protocol accepts one, the socket is open (or still connecting), and it
        is neither retired nor suspect."""
        if self.retired or not self.protocol.accepts_turn or self.keepalive.suspect:
            return False
        return self.writer.writable() if self._open else self.connecting

    def expired(self) -> bool:
        """Should be replaced before the next turn: no turn on it and unused for ``max_idle``, or open for
        ``max_age`` (a connection still connecting is not retired by age: under load it would be closed before
        it ever served)."""
        if self.sinks or self.protocol.closed:
            return False
        settings, now = self.settings, self._loop.time()
        if settings.max_idle is not None and now - self.writer.last_used > settings.max_idle:
            return True
        return settings.max_age is not None and self._open and now - self.created_at >= settings.max_age

    def retire(self) -> None:
        """The pool replaced this connection: it takes no new turn and is closed once the turns still reading
        from it are over (at once when none is)."""
        self.retired = True
        if not self.sinks:
            self._close_retired()

    def _close_retired(self) -> None:
        if self._retiring is None:
            self._retiring = self._loop.create_task(self.close(), name=f"{self.name}-retire")

    # --- Link: sinks and commands ----------------------------------------------------------------------

    def attach(self, turn_id: str, sink: Sink) -> None:
        self.sinks[turn_id] = sink

    def detach(self, turn_id: str) -> None:
        self.sinks.pop(turn_id, None)
        if self.retired and not self.sinks:
            self._close_retired()

    async def flush(self, timeout: float | None = None) -> None:
        """After a command: dispatch its events, follow its deadline, write its frames (bounded by ``timeout``
        when given; while the socket is still connecting they wait in the protocol and go out once it is
        open). Raises :class:`TTSConnectionError` when the socket is closed or lost (the protocol was told
        first, so its frames count as never written)."""
        self._after_input()
        if not self.protocol.has_data_to_send():
            return
        if not self._open and self.connecting:
            return
        if timeout is None:
            await self.writer.write()
        else:
            await asyncio.wait_for(self.writer.write(), timeout)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Until ``predicate()`` holds (checked after each message and when the connection opens or closes), at
        most ``timeout``: its value then."""
        if predicate() or self.protocol.closed:
            return predicate()
        waiter: asyncio.Future[None] = self._loop.create_future()
        entry = (predicate, waiter)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)
        return predicate()

    def _wake_waiters(self) -> None:
        closed = self.protocol.closed
        for predicate, waiter in self._waiters:
            if not waiter.done() and (closed or predicate()):
                waiter.set_result(None)

    # --- connect ------------------------------------------------------------------------------------------

    def start(self, timeout: float | None = None) -> None:
        """Connect in the background: a turn may open on the connection at once; its frames wait in the
        protocol until the socket is open. A connect that fails closes the protocol with its error
        (:meth:`TurnProtocol.close`): the turn on it ends (or is retried) through its own events.

        The one bound on opening a connection (DNS, TCP, the proxy, TLS and the HTTP upgrade): ``timeout``
        seconds from now (a turn's own timeout), else ``connect_timeout``. Called again while it connects (a
        turn takes a standby still connecting), a sooner bound replaces the later one."""
        now = self._loop.time()
        by = now + (self.settings.connect_timeout if timeout is None else timeout)
        if self._opening is None:
            self._connect_from, self._connect_by = now, by
            self._opening = self._loop.create_task(self._connect(), name=f"{self.name}-connect")
            self._connect_timer = self._loop.call_at(by, self._connect_overdue)
            self._arm()  # the protocol's own deadlines run while it connects (a turn's timeout)
        elif self.connecting and by < self._connect_by:
            self._connect_by = by
            if self._connect_timer is not None:
                self._connect_timer.cancel()
            self._connect_timer = self._loop.call_at(by, self._connect_overdue)

    def _connect_overdue(self) -> None:
        self._connect_timer = None
        if self.connecting and self._opening is not None:
            self._overdue = True
            self._opening.cancel()

    async def connect(self, timeout: float | None = None) -> None:
        """Connect and wait until open; raises the protocol's typed error of a failed connect (the protocol
        was closed with it). A caller cancelled meanwhile closes the connection."""
        self.start(timeout)
        try:
            await self.wait_open()
        except asyncio.CancelledError:
            await self.close()
            raise

    async def wait_open(self) -> None:
        """Until the connect is over: raises its error (or :class:`TTSConnectionError` when the connection was
        closed meanwhile)."""
        task = self._opening
        if task is None:
            raise TTSConnectionError(f"{self.name}: not connecting")
        try:
            error = await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                raise  # the caller was cancelled
            error = TTSConnectionError(f"{self.name}: closed while connecting")
        if error is not None:
            raise error
        if self.protocol.closed and not self._open:
            raise TTSConnectionError(f"{self.name}: closed while connecting")

    async def _connect(self) -> TTSBridgeError | None:
        """Open the socket within the bound :meth:`start` keeps. Returns the typed error of a failure (the
        protocol was closed with it)."""
        proto = self.protocol
        req = proto.connect_request()
        logger.debug("%s: connecting %s", self.name, req.safe_url)
        error: TTSBridgeError | None
        try:
            await self._handshake(req)
            assert self.socket is not None
            error = proto.handshake_accepted(self.socket.ws.subprotocol, self._loop.time())
        except asyncio.CancelledError:
            if self.socket is not None:
                self.socket.abort()
            if not self._overdue:
                raise  # closed while connecting
            uncancel = getattr(asyncio.current_task(), "uncancel", None)  # (Python >= 3.11)
            if uncancel is not None:
                uncancel()
            error = proto.connect_failed("timeout", "", self._connect_by - self._connect_from)
        except ssl.SSLCertVerificationError as exc:  # permanent for this endpoint, typed (engine/tls.py)
            error = certificate_error(proto.provider, req.url, exc)
        except InvalidStatus as exc:
            response = exc.response
            error = proto.handshake_rejected(response.status_code, response.headers, response.body or b"")
        except (InvalidHandshake, InvalidURI, OSError) as exc:
            kind = (
                "invalid_uri"
                if isinstance(exc, InvalidURI)
                else "invalid_handshake"
                if isinstance(exc, InvalidHandshake)
                else "network"
            )
            detail = f"{type(exc).__name__}: {redact(exc, req.secrets)}"
            error = proto.connect_failed(kind, detail, self._connect_by - self._connect_from)
        finally:
            if self._connect_timer is not None:
                self._connect_timer.cancel()
                self._connect_timer = None
        if error is None:
            self._opened()
        else:
            self._failed_open(error)
        return error  # (no await after this: a close it started never cancels this task)

    async def _handshake(self, req: ConnectRequest) -> None:
        uri = parse_uri(req.url)
        ws = ClientProtocol(
            uri,
            subprotocols=[Subprotocol(s) for s in req.subprotocols] or None,
            max_size=self.settings.max_size,
            logger=RedactingLogger(logging.getLogger("ttsbridge.websockets"), req.secrets),
        )  # no extensions: no permessage-deflate (see the module docstring)
        settings = self.settings
        tls = (settings.ssl or await client_context()) if uri.secure else None  # (built off the loop, once)
        sock = await open_transport(
            uri,
            proxy_for(req.url, settings.proxy),
            lambda: Socket(ws, self, req.headers, USER_AGENT),
            USER_AGENT,
            tls,
        )
        self.socket = self.writer.socket = sock
        await sock.handshake

    def _opened(self) -> None:
        self._open = True
        self.keepalive.heard()
        self.writer.last_used = self._loop.time()
        if self.protocol.closed:  # closed while connecting
            self._start_close()
        elif self._lost_early:  # closed or dropped right after the handshake
            self.transport_lost()
        else:
            self.inbox.release()  # frames that came with the handshake's response
            self._after_input()
            if self.protocol.has_data_to_send():
                self.writer.write_soon()  # what waited in the protocol while it connected
        self._wake_waiters()

    def _failed_open(self, error: TTSBridgeError) -> None:
        sock = self.socket
        if sock is not None and not sock.opened:
            sock.abort()
        proto = self.protocol
        if not proto.closed:
            proto.close(error, self._loop.time())
            self._dispatch(proto.events_received())
        if sock is not None and sock.opened:  # (accepted by websockets, refused by the protocol)
            self._loop.call_soon(self._start_close)  # after this task is over: it never cancels it
        self._cancel_timer()
        self._wake_waiters()

    # --- the socket's owner -------------------------------------------------------------------------------

    def new_read(self) -> None:
        """The socket got a new read: anything read proves the connection alive."""
        self.inbox.new_read()
        self.keepalive.heard()

    def incoming(self, data: bytes, text: bool) -> None:
        self.inbox.put(data, text)

    def pong(self, data: bytes) -> None:
        self.keepalive.pong(data)

    def transport_lost(self) -> None:
        """The server's close frame arrived, or the transport ended: what was queued is handled first, then
        the live turns fail with the close's code and reason, and the socket is closed (bounded)."""
        if self._ended:
            return
        if not self._open:  # the handshake just completed and the opening task has not seen it yet
            self._lost_early = True
            return
        self._ended = True
        self.inbox.flush()  # (its reading resumed too: else the server's TCP close is never read)
        assert self.socket is not None
        self._lost(*self.socket.close_info())
        self._start_close()  # done, or bounded by close_timeout (then the transport is aborted)

    def _pause_reading(self) -> None:
        if self.socket is not None:
            self.socket.pause_reading()

    def _resume_reading(self) -> None:
        if self.socket is not None:
            self.socket.resume_reading()

    def _send_ping(self, data: bytes) -> bool:
        return self._open and self.socket is not None and self.socket.ping(data)

    # --- reading ------------------------------------------------------------------------------------------

    def _handle(self, data: bytes, text: bool) -> None:
        """Feed one message to the protocol, dispatch its events, write its frames, follow its deadline.
        Once the protocol is closed, messages are discarded (until the close handshake completes)."""
        proto = self.protocol
        if proto.closed:
            return
        if text:
            try:
                frame: str | bytes = data.decode()
            except UnicodeDecodeError as exc:
                return self._invalid_text(exc)
        else:
            frame = data
        try:
            proto.receive(frame, self._loop.time())
        except Exception as exc:  # a bug must not leave turns hanging
            logger.exception("%s: reader failed", self.name)
            proto.connection_lost(None, f"reader failed: {type(exc).__name__}", self._loop.time())
        try:
            self._dispatch(proto.events_received())
        except Exception as exc:  # a bug must not leave turns hanging, nor the socket open
            logger.exception("%s: reader failed", self.name)
            with contextlib.suppress(Exception):  # (a sink that raised again: logged above)
                self._lost(None, f"reader failed: {type(exc).__name__}")
        if proto.has_data_to_send():
            self.writer.write_soon()
        if proto.closed:
            self._start_close()
        elif self._timer is None:
            self._arm()  # (an armed timer re-arms itself when it fires: the scan runs only while none is armed)
        if self._waiters:
            self._wake_waiters()

    def _invalid_text(self, exc: UnicodeDecodeError) -> None:
        """A text frame that is not UTF-8 (RFC 6455 section 8.1: fail the connection with 1007)."""
        detail = f"the server sent a text frame that is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        logger.warning("%s: %s", self.name, detail)
        self._lost(None, detail)
        if self.socket is not None:
            self.socket.fail(1007, "invalid UTF-8")
        self._start_close()

    def _dispatch(self, events: list[Event]) -> None:
        sinks = self.sinks
        for ev in events:
            if type(ev) is AudioReceived:  # the hot path: straight into the turn's sink
                sink = sinks.get(ev.turn_id)
                if sink is not None:
                    sink(ev)
                    if ev.first:  # the rest of this read waits until the framework has it (HOLD)
                        self.inbox.hold()
                        if self.audio_at is None:
                            self.audio_at = self._loop.time()
                    continue
            elif isinstance(ev, ConnectionFailed):
                self._cancel_timer()
                if self.error is None:
                    self.error = ev.error
            else:
                sink = sinks.pop(ev.turn_id, None)  # nothing follows a turn's end
                if sink is not None:
                    sink(ev)
                    if self.retired and not sinks:
                        self._close_retired()
                    continue
            if self.on_event is not None:
                self.on_event(ev)

    def _lost(self, code: int | None, reason: str) -> None:
        self.protocol.connection_lost(code, reason, self._loop.time())
        self._dispatch(self.protocol.events_received())

    def _lost_on_write(self) -> None:
        if self.socket is not None:
            self._lost(*self.socket.close_info())

    def _after_input(self) -> None:
        proto = self.protocol
        self._dispatch(proto.events_received())
        if proto.closed:
            self._start_close()
        else:
            self._arm()
        if self._waiters:
            self._wake_waiters()

    # --- the timer: the protocol's deadlines and the keepalive ------------------------------------------------

    def _arm(self) -> None:
        """Follow ``protocol.next_deadline()`` and the keepalive: a timer already set no later than the earlier
        of them stays (it re-arms)."""
        deadline = self.protocol.next_deadline()
        check = self.keepalive.check_at() if self._open and not self.protocol.closed else None
        if check is not None and (deadline is None or check < deadline):
            deadline = check
        if deadline is None or (self._timer is not None and self._timer_at <= deadline):
            return
        self._cancel_timer()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        proto = self.protocol
        if proto.closed:
            return
        now = self._loop.time()
        timeouts = proto.timeouts
        proto.tick(now)
        if self._open and not proto.closed:
            if proto.timeouts != timeouts:
                self.keepalive.condemn(now)  # audio was owed and did not come: is the connection still there?
            self.keepalive.due(now)
        self._after_input()
        if self._open and proto.has_data_to_send():
            self.writer.write_soon()

    def _dead(self, detail: str, now: float) -> None:
        """No answer to the ping: the path is dead. Every turn ends now; the transport is aborted (a close
        handshake cannot complete over a dead path)."""
        self.protocol.connection_silent(detail, now)
        self._dispatch(self.protocol.events_received())
        if self.socket is not None:
            self.socket.abort()
        self._start_close()

    # --- closing ------------------------------------------------------------------------------------------

    def _start_close(self) -> asyncio.Task[None]:
        """The one task closing the socket (started once: the protocol closed, the transport ended, or
        :meth:`close`)."""
        if self._closer is None:
            self._cancel_timer()
            self._closer = self._loop.create_task(self._close_socket(), name=f"{self.name}-close")
        return self._closer

    async def _close_socket(self) -> None:
        opening = self._opening
        if opening is not None and not opening.done():
            opening.cancel()  # closed while connecting: the connect stops (its transport is aborted)
            await asyncio.wait({opening})
        sock = self.socket
        if sock is not None:
            code, reason = self.protocol.close_frame()
            with contextlib.suppress(Exception):  # bounded by close_timeout (then the transport is aborted)
                await sock.close(code, reason, self.settings.close_timeout)
        self.writer.cancel()
        self._wake_waiters()

    async def close(self, error: TTSBridgeError | None = None) -> None:
        """Close the connection: the protocol first (its live turns end: with ``error``, or "closed by the
        client"), then the socket, bounded."""
        proto = self.protocol
        if not proto.closed:
            proto.close(error, self._loop.time())
            self._dispatch(proto.events_received())
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self._start_close()), self.settings.close_timeout + 1.0)
