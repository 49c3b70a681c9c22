"""The one asyncio connection loop both providers use (modelled on ``websockets.asyncio.connection``).

:class:`Connection` owns a WebSocket and a :class:`~ttsbridge.engine.protocol.TurnProtocol` and holds no turn
state: its reader feeds every frame to ``protocol.receive``, dispatches ``protocol.events_received()`` (turn
events to the sink attached for that turn, the rest to the connection-level ``on_event`` callback) and writes
``protocol.data_to_send()``. One timer follows ``protocol.next_deadline()`` and calls ``protocol.tick``.
Connections are made without permessage-deflate (``compression=None``): the frames are base64 audio or
MessagePack, which compress poorly, and the extension cost a few % of the client's CPU and ~150 KiB of heap
per pooled connection (docs/benchmarks.md). Closing is bounded: the reader keeps draining until the close handshake completes (so the server's close
reply, queued behind frames it was still sending, is seen), and websockets aborts the transport after
``close_timeout``.

Callers drive the protocol with its commands and then ``await connection.flush()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.protocol import State
from websockets.typing import Subprotocol

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import redact
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnEvent
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.errors import TTSBridgeError, TTSConnectionError

logger = logging.getLogger("ttsbridge.engine")

USER_AGENT = "ttsbridge/0.1"
Sink = Callable[[TurnEvent], None]


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
        self.ping_interval = ping_interval
        self.max_size = max_size
        self.name = name or protocol.provider
        #: Extra keyword arguments for ``websockets.connect`` (e.g. ``proxy``).
        self.connect_options = connect_options or {}
        self.sinks: dict[str, Sink] = {}
        self.ws: ClientConnection | None = None
        self._loop = asyncio.get_running_loop()
        self.opened_at = self.last_used = self._loop.time()
        self._reader: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
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
        reader saw it: the websockets state knows at once.)"""
        return self.ws is not None and not self.protocol.closed and self.ws.state is State.OPEN

    def idle_for(self) -> float:
        return self._loop.time() - self.last_used

    # --- sinks --------------------------------------------------------------------------------------------

    def attach(self, turn_id: str, sink: Sink) -> None:
        self.sinks[turn_id] = sink

    def detach(self, turn_id: str) -> None:
        self.sinks.pop(turn_id, None)

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
                    ping_interval=self.ping_interval,
                    ping_timeout=self.ping_interval,
                    logger=RedactingLogger(logging.getLogger("ttsbridge.websockets"), req.secrets),
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
        self.opened_at = self.last_used = self._loop.time()
        self._reader = self._loop.create_task(self._read_loop(), name=f"{self.name}-reader")

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
            if not self.protocol.closed and self.ws is not None:  # closing; the reader has not seen it yet
                self._lost(*_close_info(None, self.ws))
            raise TTSConnectionError(f"{self.name}: the connection is closed")
        ws = self.ws
        assert ws is not None
        self.last_used = self._loop.time()
        try:
            async with self._send_lock:
                for frame in self.protocol.data_to_send():
                    await ws.send(frame)
        except ConnectionClosed as exc:
            code, reason = _close_info(exc)
            self._lost(code, reason)
            raise TTSConnectionError(f"{self.name}: connection lost while sending ({reason})") from None

    async def _write_quietly(self) -> None:
        with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
            await asyncio.wait_for(self._write(), self.write_timeout)

    def _lost(self, code: int | None, reason: str) -> None:
        self.protocol.connection_lost(code, reason, self._loop.time())
        self._dispatch(self.protocol.events_received())

    # --- reading ------------------------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        """Read until the socket is closed, whatever the frames; once the protocol is closed, discard."""
        ws = self.ws
        assert ws is not None
        proto = self.protocol
        try:
            async for message in ws:
                if proto.closed:
                    continue  # closing: discard until the close handshake completes
                try:
                    proto.receive(message, self._loop.time())
                except Exception as exc:  # a bug must not leave turns hanging, nor the socket open
                    logger.exception("%s: reader failed", self.name)
                    proto.connection_lost(None, f"reader failed: {type(exc).__name__}", self._loop.time())
                self._dispatch(proto.events_received())
                if self.on_receive is not None:
                    self.on_receive()
                if proto.has_data_to_send():
                    await self._write_quietly()
                if proto.closed:
                    self._start_close()
                elif self._timer is None:
                    self._arm()  # an armed timer re-arms itself when it fires: no deadline scan per frame
        except ConnectionClosed as exc:
            code, reason = _close_info(exc)
        except Exception as exc:  # a bug must not leave turns hanging
            logger.exception("%s: reader failed", self.name)
            code, reason = None, f"reader failed: {type(exc).__name__}"
        else:
            code, reason = _close_info(None, ws)
        self._lost(code, reason)
        await self._start_close()  # done, or bounded by close_timeout (then websockets aborts the transport)

    def _dispatch(self, events: list[Event]) -> None:
        sinks = self.sinks
        for ev in events:
            if type(ev) is AudioReceived:  # the hot path: straight into the turn's sink
                sink = sinks.get(ev.turn_id)
                if sink is not None:
                    sink(ev)
                    continue
            elif isinstance(ev, ConnectionFailed):
                self._cancel_timer()
            else:
                sink = sinks.pop(ev.turn_id, None)  # nothing follows a turn's end
                if sink is not None:
                    sink(ev)
                    continue
            if self.on_event is not None:
                self.on_event(ev)

    def _after_input(self) -> None:
        self._dispatch(self.protocol.events_received())
        self._arm()

    # --- the deadline timer -------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Follow ``protocol.next_deadline()``: a timer already set no later than it stays (it re-arms)."""
        deadline = self.protocol.next_deadline()
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
        self.protocol.tick(self._loop.time())
        self._after_input()
        if self.protocol.has_data_to_send() and (self._writer is None or self._writer.done()):
            self._writer = self._loop.create_task(self._write_quietly(), name=f"{self.name}-writer")

    # --- closing ------------------------------------------------------------------------------------------

    def _start_close(self) -> asyncio.Task[None]:
        """The one task closing the socket (started once, by the reader or by :meth:`close`)."""
        if self._closer is None:
            self._closer = self._loop.create_task(self._close_ws(), name=f"{self.name}-close")
        return self._closer

    async def _close_ws(self) -> None:
        assert self.ws is not None
        with contextlib.suppress(Exception):
            # bounded by close_timeout: websockets aborts the transport when the handshake does not complete
            code, reason = self.protocol.close_frame()
            await self.ws.close(code, reason)

    async def close(self) -> None:
        """Fail what is live ("closed by the client"), close the socket (bounded), end the reader (bounded)."""
        if not self.protocol.closed:
            self._lost(None, "closed by the client")
        self._cancel_timer()
        if self.ws is not None:
            # The reader keeps draining while the close completes; both end within close_timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._start_close()), self.close_timeout + 1.0)
        if self._reader is not None:
            with contextlib.suppress(Exception):  # asyncio.TimeoutError included
                await asyncio.wait_for(self._reader, 1.0)  # cancelled if it has not ended by then
        if self._writer is not None and not self._writer.done():
            self._writer.cancel()


def _close_info(exc: ConnectionClosed | None, ws: ClientConnection | None = None) -> tuple[int | None, str]:
    """``(code, reason)`` of the server's close frame, or ``(None, description)`` when none was received."""
    rcvd = exc.rcvd if exc is not None else (ws.protocol.close_rcvd if ws is not None else None)
    if rcvd is None:
        return None, "connection dropped (no close frame)"
    return rcvd.code, rcvd.reason


__all__ = ["USER_AGENT", "Connection", "Sink"]
