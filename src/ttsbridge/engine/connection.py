"""The one asyncio connection loop both providers use (modelled on ``websockets.asyncio.connection``).

:class:`Connection` owns a WebSocket and a :class:`~ttsbridge.engine.protocol.TurnProtocol` and holds no turn
state: it feeds every frame received to ``protocol.receive``, dispatches ``protocol.events_received()`` (turn
events to the sink attached for that turn, the rest to the connection-level ``on_event`` callback) and writes
``protocol.data_to_send()``. One timer follows ``protocol.next_deadline()`` and calls ``protocol.tick``.

There is no reader task: the socket is a ``websockets`` :class:`ClientConnection` whose parsed messages are
handed to the connection in the transport's ``data_received`` callback (:mod:`ttsbridge.engine.socket`, through websockets'
``create_connection`` hook), the way the peers' receive loops push audio straight into the framework: one
loop hop from the socket to a turn's consumer, and no message assembler. What one read brings is handled in
slices of :data:`SLICE` messages, one slice per loop iteration, so a turn's first chunk reaches its consumer
(and the framework) before the rest of a burst is parsed, and other streams' work runs between slices; the
transport's reading pauses while more than :data:`INBOX_HIGH` messages wait.
Connections are made without permessage-deflate (``compression=None``): the frames are base64 audio or
MessagePack, which compress poorly, and the extension cost a few % of the client's CPU and ~150 KiB of heap
per pooled connection (docs/benchmarks.md). Closing is bounded: frames keep being read (and discarded) until the close handshake completes (so the server's close
reply, queued behind frames it was still sending, is seen), and websockets aborts the transport after
``close_timeout``.

Liveness (docs/reliability.md, "Quiet networks"; :mod:`ttsbridge.engine.liveness`): the same timer pings a
connection silent too long and finds a dead one; a suspect one (:attr:`suspect`) gets no new turn. The write
path is :mod:`ttsbridge.engine.writing`.

Callers drive the protocol with its commands and then ``await connection.flush()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI
from websockets.protocol import State
from websockets.typing import Subprotocol

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import redact
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnEvent
from ttsbridge.engine.liveness import PING_AFTER_SILENCE, PONG_TIMEOUT, LivenessMixin, check_liveness_knobs
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.reading import HOLD, INBOX_HIGH, SLICE, ReaderMixin
from ttsbridge.engine.socket import Socket
from ttsbridge.engine.tls import certificate_error, client_context, is_secure
from ttsbridge.engine.writing import WriterMixin, _close_info

logger = logging.getLogger("ttsbridge.engine")

USER_AGENT = "ttsbridge/0.1"
Sink = Callable[[TurnEvent], None]


class Connection(ReaderMixin, LivenessMixin, WriterMixin):
    """One WebSocket driven by one protocol. ``on_event`` gets :class:`ConnectionFailed` and the events of
    turns with no sink attached (e.g. the late acknowledgement of a turn its owner let go)."""

    def __init__(
        self,
        protocol: TurnProtocol,
        *,
        on_event: Callable[[Event], None] | None = None,
        on_receive: Callable[[], None] | None = None,
        connect_timeout: float = 10.0,
        close_timeout: float = 2.0,
        write_timeout: float = 2.0,
        ping_interval: float | None = 20.0,
        ping_after_silence: float | None = PING_AFTER_SILENCE,
        pong_timeout: float = PONG_TIMEOUT,
        max_size: int = 8 * 2**20,
        name: str = "",
        connect_options: dict[str, Any] | None = None,
    ) -> None:
        self.protocol = protocol
        self.on_event = on_event
        #: Called after each received frame was handled and its events dispatched (a provider's progress
        #: that is no turn event, e.g. Kitta's ``authenticated``/``ready``).
        self.on_receive = on_receive
        self.connect_timeout = connect_timeout
        self.close_timeout = close_timeout
        self.write_timeout = write_timeout
        #: Liveness (see :meth:`_check_at`): an idle connection silent this long gets a keepalive ping.
        self.ping_interval = ping_interval
        self.ping_after_silence = ping_after_silence
        self.pong_timeout = pong_timeout
        self.max_size = max_size
        self.name = name or protocol.provider
        #: Extra keyword arguments for ``websockets.connect`` (e.g. ``proxy``).
        self.connect_options = connect_options or {}
        self.sinks: dict[str, Sink] = {}
        self.ws: ClientConnection | None = None
        self._loop = asyncio.get_running_loop()
        self.last_used = self._loop.time()
        #: When the socket last read anything (a data frame, a pong, a close...): the proof of life.
        self.last_read = self.last_used
        #: Round trip of the last answered ping (seconds), None before one was.
        self.latency: float | None = None
        self.retired = False  # the pool replaced it: no new turn; closed once its turns are over
        self._ping_at: float | None = None  # a liveness ping is out since then, nothing read since
        self._condemned = False  # that ping was sent because a turn timed out
        self._ping_data = b""
        self._ping_sent = 0.0
        self._retiring: asyncio.Task[None] | None = None
        self._inbox: deque[tuple[bytes, bool]] = deque()
        self._budget = SLICE
        self._hold = 0  # loop iterations the queued messages still wait (see HOLD)
        self._drainer: asyncio.Handle | None = None
        self._paused = False  # the transport's reading, paused above INBOX_HIGH
        self._ended = False  # the transport's end was handled
        self._lost_early = False  # it ended before connect() returned
        self._sock: Socket | None = None  # set when websockets makes it (self.ws once the handshake is done)
        self._closer: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        self._write_again = False  # a frame was queued while the writer task was under way (see _write_soon)
        self._send_lock = asyncio.Lock()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __repr__(self) -> str:
        return f"Connection({self.name})"

    # --- state: asked of the protocol ---------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self.protocol.closed

    def now(self) -> float:
        """The clock the protocol is driven with (the event loop's)."""
        return self._loop.time()

    def writable(self) -> bool:
        """Open and not closing: a frame sent now is written. (A close frame may have arrived before the
        connection handled it: the websockets state knows at once.)"""
        return self.ws is not None and not self.protocol.closed and self.ws.state is State.OPEN

    def idle_for(self) -> float:
        return self._loop.time() - self.last_used

    # --- sinks --------------------------------------------------------------------------------------------

    def attach(self, turn_id: str, sink: Sink) -> None:
        self.sinks[turn_id] = sink

    def detach(self, turn_id: str) -> None:
        self.sinks.pop(turn_id, None)
        if self.retired and not self.sinks:
            self._close_retired()

    def retire(self) -> None:
        """The pool replaced this connection (it was suspect or closing): it takes no new turn and is closed
        once the turns still reading from it are over (at once when none is)."""
        self.retired = True
        if not self.sinks:
            self._close_retired()

    def _close_retired(self) -> None:
        if self._retiring is None:
            self._retiring = self._loop.create_task(self.close(), name=f"{self.name}-retire")

    # --- connect ------------------------------------------------------------------------------------------

    async def connect(self) -> None:
        proto = self.protocol
        req = proto.connect_request()
        logger.debug("%s: connecting %s", self.name, req.safe_url)
        options = self.connect_options
        if is_secure(req.url) and "ssl" not in options:  # the shared context, built off the loop (engine/tls.py)
            options = {**options, "ssl": await client_context()}
        try:
            self.ws = await asyncio.wait_for(
                connect(
                    req.url,
                    additional_headers=list(req.headers) or None,
                    subprotocols=[Subprotocol(s) for s in req.subprotocols] or None,
                    user_agent_header=USER_AGENT,
                    compression=None,  # no permessage-deflate: see docs/nineninesix.md, docs/kitta.md
                    open_timeout=None,
                    close_timeout=self.close_timeout,
                    max_size=self.max_size,
                    ping_interval=None,  # the engine's own liveness check pings (see _check_at)
                    logger=RedactingLogger(logging.getLogger("ttsbridge.websockets"), req.secrets),
                    create_connection=self._make_socket,  # type: ignore[arg-type]
                    **options,
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise proto.connect_failed("timeout", "", self.connect_timeout) from None
        except ssl.SSLCertVerificationError as exc:  # permanent for this endpoint, typed (engine/tls.py)
            raise certificate_error(proto.provider, req.url, exc) from None
        except InvalidStatus as exc:
            response = exc.response
            raise proto.handshake_rejected(
                response.status_code, response.headers, response.body or b""
            ) from None
        except (InvalidHandshake, InvalidURI, OSError) as exc:
            kind = (
                "invalid_uri"
                if isinstance(exc, InvalidURI)
                else "invalid_handshake"
                if isinstance(exc, InvalidHandshake)
                else "network"
            )
            detail = f"{type(exc).__name__}: {redact(exc, req.secrets)}"
            raise proto.connect_failed(kind, detail, self.connect_timeout) from None
        self.last_used = self.last_read = self._loop.time()
        if self._lost_early:  # closed or dropped right after the handshake
            self.transport_lost()
        elif self._inbox:  # frames that came with the handshake's response
            self._schedule_drain()

    def _make_socket(self, protocol: ClientProtocol, **kwargs: Any) -> Socket:
        self._sock = Socket(protocol, owner=self, **kwargs)
        return self._sock


    def _lost(self, code: int | None, reason: str) -> None:
        self.protocol.connection_lost(code, reason, self._loop.time())
        self._dispatch(self.protocol.events_received())

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
            if self.on_receive is not None:
                self.on_receive()
        except Exception as exc:  # a bug must not leave turns hanging, nor the socket open
            logger.exception("%s: reader failed", self.name)
            with contextlib.suppress(Exception):  # (a sink that raised again: logged above)
                self._lost(None, f"reader failed: {type(exc).__name__}")
        if proto.has_data_to_send():
            self._write_soon()
        if proto.closed:
            self._start_close()
        elif self._timer is None:
            self._arm()  # (an armed timer re-arms itself when it fires: the scan runs only while none is armed)

    def _invalid_text(self, exc: UnicodeDecodeError) -> None:
        """A text frame that is not UTF-8 (RFC 6455 section 8.1: fail the connection with 1007)."""
        detail = f"the server sent a text frame that is not valid UTF-8 ({exc.reason} at byte {exc.start})"
        logger.warning("%s: %s", self.name, detail)
        self._lost(None, detail)
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.protocol.fail(1007, "invalid UTF-8")
                sock.send_data()
        self._start_close()

    def transport_lost(self) -> None:
        """The server's close frame arrived, or the transport ended: what was queued is handled first, then
        the live turns fail with the close's code and reason, and the socket is closed (bounded)."""
        if self._ended:
            return
        if self.ws is None:  # the handshake just completed and connect() has not returned yet
            self._lost_early = True
            return
        self._ended = True
        if self._drainer is not None:
            self._drainer.cancel()
            self._drainer = None
        inbox, handle = self._inbox, self._handle
        while inbox:
            handle(*inbox.popleft())
        self._resume_reading()  # else the server's TCP close is never read
        self._lost(*_close_info(None, self._sock))
        self._start_close()  # done, or bounded by close_timeout (then websockets aborts the transport)

    def _dispatch(self, events: list[Event]) -> None:
        sinks = self.sinks
        for ev in events:
            if type(ev) is AudioReceived:  # the hot path: straight into the turn's sink
                sink = sinks.get(ev.turn_id)
                if sink is not None:
                    sink(ev)
                    if ev.first:  # the rest of this read waits until the framework has it (HOLD)
                        self._hold = HOLD
                        self._schedule_drain()
                    continue
            elif isinstance(ev, ConnectionFailed):
                self._cancel_timer()
            else:
                sink = sinks.pop(ev.turn_id, None)  # nothing follows a turn's end
                if sink is not None:
                    sink(ev)
                    if self.retired and not sinks:
                        self._close_retired()
                    continue
            if self.on_event is not None:
                self.on_event(ev)

    def _after_input(self) -> None:
        self._dispatch(self.protocol.events_received())
        self._arm()

    # --- closing ------------------------------------------------------------------------------------------

    def _start_close(self) -> asyncio.Task[None]:
        """The one task closing the socket (started once, when a frame or the close failed the protocol, or by :meth:`close`)."""
        if self._closer is None:
            self._closer = self._loop.create_task(self._close_ws(), name=f"{self.name}-close")
        return self._closer

    async def _close_ws(self) -> None:
        sock = self.ws or self._sock
        if sock is None:
            return
        with contextlib.suppress(Exception):
            # bounded by close_timeout: websockets aborts the transport when the handshake does not complete
            code, reason = self.protocol.close_frame()
            await sock.close(code, reason)

    async def close(self) -> None:
        """Fail what is live ("closed by the client"), close the socket (bounded)."""
        if not self.protocol.closed:
            self._lost(None, "closed by the client")
        self._cancel_timer()
        if self.ws is not None:
            # Frames keep being read (and discarded) while the close completes, within close_timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._start_close()), self.close_timeout + 1.0)
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()


__all__ = [
    "HOLD",
    "INBOX_HIGH",
    "PING_AFTER_SILENCE",
    "PONG_TIMEOUT",
    "SLICE",
    "USER_AGENT",
    "Connection",
    "Sink",
    "check_liveness_knobs",
]
