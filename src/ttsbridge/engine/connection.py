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

Liveness (docs/reliability.md, "Quiet networks"): a network path can die without closing. The same timer
sends a WebSocket ping (from the loop: no task) when the connection has been silent ``ping_after_silence``
while the protocol says the server owes something (``awaiting_since()``), or ``ping_interval`` while idle; a
write to a connection silent that long carries one, and a turn's timeout sends one at once (:meth:`condemn`).
Anything read within ``pong_timeout`` proves the connection alive; nothing, and it is dead
(``protocol.connection_silent``, the transport aborted). A condemned connection, or one whose ping is
unanswered for a third of ``pong_timeout``, is :attr:`suspect`: the pool hands it to no new turn.

Callers drive the protocol with its commands and then ``await connection.flush()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.client import ClientProtocol
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.protocol import State
from websockets.typing import Subprotocol

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import redact
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnEvent
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.socket import Socket
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSInvalidOptionError

logger = logging.getLogger("ttsbridge.engine")

USER_AGENT = "ttsbridge/0.1"
Sink = Callable[[TurnEvent], None]

#: Messages handled per loop iteration when a read brought more (see the module docstring).
SLICE = 8
#: Loop iterations the rest of a read waits after a turn's first audio was dispatched: what the framework
#: needs to hand that audio on (Pipecat: consumer, audio-context queue get, ``wait_for``, the push).
HOLD = 4
#: Messages waiting to be handled above which the transport stops reading (resumed once they are handled).
INBOX_HIGH = 512
#: Liveness defaults (docs/reliability.md, "Quiet networks"): a connection the server owes something and that
#: has been silent this long gets a WebSocket ping (so does a turn's first request to a connection silent
#: this long) ...
PING_AFTER_SILENCE = 1.0
#: ... and is dead when nothing at all (pong, audio, any frame) arrives within this bound after the ping.
PONG_TIMEOUT = 1.5


def check_liveness_knobs(*, ping_interval: object, ping_after_silence: object) -> None:
    """The liveness knobs a client accepts: seconds > 0, or None (that check off)."""
    for name, val in (("ping_interval", ping_interval), ("ping_after_silence", ping_after_silence)):
        if val is None:
            continue
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not val > 0:
            raise TTSInvalidOptionError(name, val, "a number of seconds > 0, or None (off)")


class Connection:
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

    @property
    def checking(self) -> bool:
        """A liveness ping is out and nothing was read since (answered or not, it is not known yet)."""
        return self._ping_at is not None

    @property
    def suspect(self) -> bool:
        """No new turn should be routed here until the connection is proven alive (anything arrives) or found
        dead (nothing within ``pong_timeout``): a turn timed out on it (:meth:`condemn`), or a ping has been
        out unanswered for a third of ``pong_timeout``. (A live connection answers within a round trip, so a
        routine check, a request's or a keepalive's, turns no new turn away: pooled connections shared by
        several streams are not replaced for it.)"""
        at = self._ping_at
        if at is None:
            return False
        return self._condemned or self._loop.time() - at >= self.pong_timeout / 3

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
                    **self.connect_options,
                ),
                self.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise proto.connect_failed("timeout", "", self.connect_timeout) from None
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

    # --- writing ------------------------------------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """After a command: dispatch its events, follow its deadline, write its frames (bounded by ``timeout``
        when given). Raises :class:`TTSConnectionError` when the socket is closed or lost (the protocol was
        told first, so its frames count as never written)."""
        self._after_input()
        if not self.protocol.has_data_to_send():
            return
        if timeout is None:
            await self._write()
        else:
            await asyncio.wait_for(self._write(), timeout)

    async def _write(self) -> None:
        if not self.writable():
            if not self.protocol.closed and self.ws is not None:  # closing; its close frame not handled yet
                self._lost(*_close_info(None, self.ws))
            raise TTSConnectionError(f"{self.name}: the connection is closed")
        ws = self.ws
        assert ws is not None
        now = self.last_used = self._loop.time()
        after = self.ping_after_silence
        if after is not None and self._ping_at is None and now - self.last_read >= after:
            # A request to a connection that has been silent a while (an idle pooled one, a warm standby):
            # the liveness check goes out with it, so a dead path is found before the request's deadline.
            self._ping(now)
        if not ws.paused and not self._send_lock.locked():
            # The usual case: the transport takes the frames now (no await, no lock, no drain). The sans-I/O
            # protocol frames them and websockets' own send_data() writes them, as ws.send() would.
            sans_io = ws.protocol
            for frame in self.protocol.data_to_send():
                if type(frame) is str:
                    sans_io.send_text(frame.encode())
                else:
                    sans_io.send_binary(frame)
            ws.send_data()
            return
        try:  # the transport's buffer is full (or a write waits for it): websockets' send drains it first
            async with self._send_lock:
                while self.protocol.has_data_to_send():  # frames queued while this one waited
                    for frame in self.protocol.data_to_send():
                        await ws.send(frame)
        except ConnectionClosed as exc:
            code, reason = _close_info(exc)
            self._lost(code, reason)
            raise TTSConnectionError(f"{self.name}: connection lost while sending ({reason})") from None

    async def _write_quietly(self) -> None:
        while True:
            self._write_again = False
            with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
                await asyncio.wait_for(self._write(), self.write_timeout)
            if not self._write_again:  # (nothing was queued for it while this write was under way)
                return

    def _lost(self, code: int | None, reason: str) -> None:
        self.protocol.connection_lost(code, reason, self._loop.time())
        self._dispatch(self.protocol.events_received())

    # --- reading ------------------------------------------------------------------------------------------

    def new_read(self) -> None:
        """The socket got a new read: its first :data:`SLICE` messages may be handled at once. Anything read
        proves the connection alive (a liveness ping out is answered)."""
        self._budget = SLICE
        self.last_read = self._loop.time()
        self._ping_at = None
        self._condemned = False

    def pong(self, data: bytes) -> None:
        """A pong arrived (the socket's control frames): the round trip of our last ping, if it answers it."""
        if data == self._ping_data and self._ping_data:
            self.latency = self.last_read - self._ping_sent
            self._ping_data = b""
            logger.debug("%s: pong in %.1f ms", self.name, self.latency * 1000)

    def incoming(self, data: bytes, text: bool) -> None:
        """One message, from the socket's ``data_received``: handled now while this read's slice lasts,
        else queued for the next slice (in order)."""
        inbox = self._inbox
        if inbox or self._budget <= 0 or self._hold or self.ws is None:
            inbox.append((data, text))
            if self.ws is None:
                return  # frames that came with the handshake's response: handled once connect() returns
            self._schedule_drain()
            if len(inbox) > INBOX_HIGH and not self._paused and self._sock is not None:
                self._paused = True
                with contextlib.suppress(Exception):
                    self._sock.transport.pause_reading()
            return
        self._budget -= 1
        self._handle(data, text)

    def _schedule_drain(self) -> None:
        """The next slice of the queued messages in the next loop iteration (one drain chain at a time)."""
        if self._drainer is None:
            self._drainer = self._loop.call_soon(self._drain)

    def _resume_reading(self) -> None:
        if self._paused and self._sock is not None:
            self._paused = False
            with contextlib.suppress(Exception):  # the transport may be gone already
                self._sock.transport.resume_reading()

    def _drain(self) -> None:
        """One slice of the queued messages; the next slice in the next loop iteration."""
        self._drainer = None
        if self._hold:
            self._hold -= 1
            self._schedule_drain()
            return
        inbox, handle = self._inbox, self._handle
        try:
            for _ in range(min(SLICE, len(inbox))):
                if self._hold:
                    break
                handle(*inbox.popleft())
        finally:  # (handle() catches what it can; a slice never ends the draining)
            if inbox:
                self._schedule_drain()  # (a first audio handled in this slice may have scheduled it)
            else:
                self._resume_reading()

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

    # --- the deadline timer -------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Follow ``protocol.next_deadline()`` and the liveness check: a timer already set no later than the
        earlier of them stays (it re-arms)."""
        deadline = self.protocol.next_deadline()
        check = self._check_at()
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
        if self.protocol.closed:
            return
        now = self._loop.time()
        proto = self.protocol
        timeouts = proto.timeouts
        proto.tick(now)
        if proto.timeouts != timeouts:
            self.condemn()  # audio was owed and did not come: is the connection still there?
        self._liveness(now)
        self._after_input()
        if self.protocol.has_data_to_send():
            self._write_soon()

    # --- liveness (docs/reliability.md, "Quiet networks") ---------------------------------------------------

    def _check_at(self) -> float | None:
        """When the liveness check needs the timer next: the answer to a ping out is due; or the server owes
        something (``protocol.awaiting_since()``) and the connection has been silent ``ping_after_silence``;
        or it owes nothing and has been silent ``ping_interval`` (keepalive). Silence is measured from the
        last read of any kind, so a server that streams (or answers pings) is never pinged more than once
        per ``ping_after_silence``."""
        if self.ws is None or self.protocol.closed:
            return None
        if self._ping_at is not None:
            return self._ping_at + self.pong_timeout
        owed = self.protocol.awaiting_since()
        if owed is not None:
            after = self.ping_after_silence
            return None if after is None else max(owed, self.last_read) + after
        interval = self.ping_interval
        return None if interval is None else self.last_read + interval

    def _liveness(self, now: float) -> None:
        if self._ping_at is not None:
            if now >= self._ping_at + self.pong_timeout:
                self._dead(now)
            return
        due = self._check_at()
        if due is not None and now >= due:
            self._ping(now)

    def condemn(self) -> None:
        """A turn timed out on this connection: no new turn goes here (:attr:`suspect`) until a ping proves it
        alive; no answer within ``pong_timeout`` and it is dead (every turn on it ends at once)."""
        if self.protocol.closed or self.ws is None:
            return
        self._condemned = True
        if self._ping_at is None:
            self._ping(self._loop.time())
            self._arm()

    def _ping(self, now: float) -> None:
        """Send a ping from the loop (no task, no lock: a control frame may go between any two frames)."""
        ws = self.ws
        if ws is None or ws.state is not State.OPEN:
            return
        self._ping_at = self._ping_sent = now
        self._ping_data = os.urandom(4)
        with contextlib.suppress(Exception):  # (the socket is going: the protocol hears of it anyway)
            ws.protocol.send_ping(self._ping_data)
            ws.send_data()

    def _dead(self, now: float) -> None:
        """No answer to the ping: the path is dead. Every turn ends now; the transport is aborted (a close
        handshake cannot complete over a dead path)."""
        silent = now - self.last_read
        detail = (
            f"connection silent for {silent:.1f}s: no answer to a ping within {self.pong_timeout:g}s "
            "(the network path is dead)"
        )
        logger.warning("%s: %s", self.name, detail)
        self._ping_at = None
        self._condemned = False
        self.protocol.connection_silent(detail, now)
        self._dispatch(self.protocol.events_received())
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.transport.abort()
        self._start_close()

    def _write_soon(self) -> None:
        """Write what the protocol queued from a callback (a frame received, the timer): one writer task. One
        already under way may have taken the queue before this frame was put in it: it writes once more."""
        if self._writer is None or self._writer.done():
            self._writer = self._loop.create_task(self._write_quietly(), name=f"{self.name}-writer")
        else:
            self._write_again = True

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


def _close_info(exc: ConnectionClosed | None, ws: ClientConnection | None = None) -> tuple[int | None, str]:
    """``(code, reason)`` of the server's close frame, or ``(None, description)`` when none was received."""
    rcvd = exc.rcvd if exc is not None else (ws.protocol.close_rcvd if ws is not None else None)
    if rcvd is None:
        sent = exc.sent if exc is not None else (ws.protocol.close_sent if ws is not None else None)
        if sent is not None and sent.code not in (1000, 1006):
            # websockets failed the connection on what the server sent (a message over max_size, a
            # protocol error): say what, with the close code it sent
            return None, f"closed by the client: {sent.reason or 'protocol error'} (code {sent.code})"
        return None, "connection dropped (no close frame)"
    return rcvd.code, rcvd.reason


__all__ = ["PING_AFTER_SILENCE", "PONG_TIMEOUT", "USER_AGENT", "Connection", "Sink", "check_liveness_knobs"]
