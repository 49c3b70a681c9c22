"""The engine's socket: its own :class:`asyncio.Protocol` driving websockets' public sans-I/O
:class:`~websockets.client.ClientProtocol`, as ``websockets/asyncio/connection.py`` does itself.

:class:`Socket` writes the opening handshake, feeds every read to ``ClientProtocol.receive_data`` and writes
what it answers (pongs, the close reply); each parsed data message (a fragmented one put back together) goes
to its owner, the engine's :class:`~ttsbridge.engine.connection.Connection`, in the transport's
``data_received``: no reader task, no message queue of its own. Control frames and the close handshake are
websockets' sans-I/O protocol's; the owner hears of a new read (``new_read``), of every message
(``incoming``), of a pong (``pong``) and of the server's close frame, a frame websockets refused, or the
transport's end (``transport_lost``).

Only websockets' documented sans-I/O API is used (``ClientProtocol``: ``connect``, ``send_request``,
``receive_data``, ``receive_eof``, ``events_received``, ``data_to_send``, ``send_text``/``send_binary``/
``send_ping``/``send_close``/``fail``, ``state``, ``handshake_exc``, ``subprotocol``, ``close_rcvd``/
``close_sent``; :class:`~websockets.frames.Frame`): pinned in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Protocol

from websockets.client import ClientProtocol
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import State

logger = logging.getLogger("ttsbridge.engine")

#: Frames of one fragmented message (websockets' own assembler's limit).
MAX_FRAGMENTS = 4096
#: The transport's write buffer: writes above it wait for it to drain (websockets' default ``write_limit``).
WRITE_LIMIT = 2**15

_TEXT, _BINARY, _CONT, _PONG = Opcode.TEXT, Opcode.BINARY, Opcode.CONT, Opcode.PONG
_OPEN = State.OPEN


class Owner(Protocol):
    """What a :class:`Socket` tells the engine's connection."""

    name: str

    def new_read(self) -> None: ...

    def incoming(self, data: bytes, text: bool) -> None: ...

    def pong(self, data: bytes) -> None: ...

    def transport_lost(self) -> None: ...


class Socket(asyncio.Protocol):
    """One WebSocket as an asyncio protocol over websockets' sans-I/O ``ClientProtocol`` ``ws``.

    ``headers`` go on the upgrade request. :attr:`handshake` resolves when the server answered it (an exception:
    websockets' ``InvalidStatus`` / ``InvalidHandshake``, or the transport's end); :attr:`lost` when the
    transport is gone."""

    def __init__(
        self, ws: ClientProtocol, owner: Owner, headers: Iterable[tuple[str, str]], user_agent: str
    ) -> None:
        self.ws = ws
        self.owner = owner
        self._headers = list(headers)
        self._user_agent = user_agent
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.handshake: asyncio.Future[None] = loop.create_future()
        self.lost: asyncio.Future[None] = loop.create_future()
        #: The opening handshake succeeded (before that, a failure is the connect's to report).
        self.opened = False
        #: Writing is paused: the transport's buffer is above :data:`WRITE_LIMIT`.
        self.paused = False
        self._drainers: list[asyncio.Future[None]] = []
        self._parts: list[bytes] = []  # the frames so far of a fragmented message
        self._text = False

    # --- asyncio.Protocol ---------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(WRITE_LIMIT)
        ws = self.ws
        request = ws.connect()
        for name, value in self._headers:
            request.headers[name] = value
        request.headers.setdefault("User-Agent", self._user_agent)
        ws.send_request(request)
        self.send_data()

    def data_received(self, data: bytes) -> None:
        owner = self.owner
        owner.new_read()
        ws = self.ws
        ws.receive_data(data)
        events = ws.events_received()
        self.send_data()  # what websockets answers at once: a pong, the close reply
        for event in events:
            if type(event) is Frame:
                self._frame(event)
            else:  # the handshake's response (the first event)
                self._answered()
        if self.opened and ws.state is not _OPEN:
            # the server's close frame (what came before it was handled first), or a frame websockets refused
            # (over max_size, a protocol error: it failed the connection): the turns end now
            owner.transport_lost()

    def eof_received(self) -> bool | None:
        ws = self.ws
        ws.receive_eof()
        events = ws.events_received()  # (a handshake response without Content-Length ends at EOF)
        self.send_data()
        for event in events:
            if type(event) is not Frame:
                self._answered()
        return None  # the transport closes: a WebSocket never writes after the peer's EOF

    def connection_lost(self, exc: Exception | None) -> None:
        self.ws.receive_eof()  # idempotent: the state becomes CLOSED
        if not self.handshake.done():
            err = (
                self.ws.handshake_exc
                or exc
                or ConnectionResetError("the connection closed during the handshake")
            )
            self.handshake.set_exception(err)
            self.handshake.exception()  # retrieved here: the connect reports it (or was given up)
        if not self.lost.done():
            self.lost.set_result(None)
        self._wake_drainers()
        if self.opened:
            self.owner.transport_lost()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self._wake_drainers()

    # --- reading ------------------------------------------------------------------------------------------

    def _answered(self) -> None:
        if self.handshake.done():
            return
        exc = self.ws.handshake_exc
        if exc is None:
            self.opened = True
            self.handshake.set_result(None)
        else:
            self.handshake.set_exception(exc)
            self.handshake.exception()  # (retrieved: the connect reports it)

    def _frame(self, frame: Frame) -> None:
        op = frame.opcode
        if op > _BINARY:
            if op is _PONG:
                self.owner.pong(bytes(frame.data))
            return  # a ping is answered and a close replied to by websockets itself
        if op is _CONT:
            self._parts.append(frame.data)
            if not frame.fin:
                if len(self._parts) > MAX_FRAGMENTS:  # what websockets' own assembler refuses
                    self._parts = []
                    self.fail(CloseCode.MESSAGE_TOO_BIG, "too many fragments")
                return
            data = b"".join(self._parts)
            self._parts = []
            text = self._text
        elif not frame.fin:
            self._parts, self._text = [frame.data], op is _TEXT
            return
        else:
            data, text = frame.data, op is _TEXT
            if type(data) is not bytes:  # websockets may hand over a bytearray
                data = bytes(data)
        try:
            self.owner.incoming(data, text)
        except Exception:  # never into asyncio's transport (it would abort the socket mid-read)
            logger.exception("%s: failed to handle a message", self.owner.name)

    def pause_reading(self) -> None:
        with contextlib.suppress(Exception):  # the transport may be gone already
            assert self.transport is not None
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        with contextlib.suppress(Exception):
            assert self.transport is not None
            self.transport.resume_reading()

    # --- writing ------------------------------------------------------------------------------------------

    @property
    def open(self) -> bool:
        """A frame written now goes out (the handshake is done and no close frame was sent or received)."""
        return self.opened and self.ws.state is _OPEN

    def send_data(self) -> None:
        """Write what websockets' protocol has for the network (an empty write: half-close, or close)."""
        transport = self.transport
        if transport is None:
            return
        for data in self.ws.data_to_send():
            if data:
                transport.write(data)
            elif transport.can_write_eof():
                with contextlib.suppress(Exception):  # (OSError, or uvloop's RuntimeError)
                    transport.write_eof()
            else:
                transport.close()

    def write(self, frames: Iterable[str | bytes]) -> None:
        """Frame ``frames`` (``str``: text, ``bytes``: binary) and write them now (no await, no lock)."""
        ws = self.ws
        for frame in frames:
            if type(frame) is str:
                ws.send_text(frame.encode())
            else:
                ws.send_binary(frame)  # type: ignore[arg-type]
        self.send_data()

    async def drain(self) -> None:
        """Until the transport's buffer is below its limit (or the transport is gone)."""
        if not self.paused or self.lost.done():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._drainers.append(waiter)
        try:
            await waiter
        finally:
            self._drainers.remove(waiter)

    def _wake_drainers(self) -> None:
        for waiter in self._drainers:
            if not waiter.done():
                waiter.set_result(None)

    def ping(self, data: bytes) -> bool:
        """Send a ping (a control frame may go between any two frames); False when the socket is not open."""
        if not self.open:
            return False
        with contextlib.suppress(Exception):  # (the socket is going: the owner hears of it anyway)
            self.ws.send_ping(data)
            self.send_data()
        return True

    def fail(self, code: int, reason: str) -> None:
        """Fail the WebSocket connection (RFC 6455 7.1.7): a close frame with ``code``, nothing more is read."""
        with contextlib.suppress(Exception):
            self.ws.fail(code, reason)
            self.send_data()

    def close_info(self) -> tuple[int | None, str]:
        """``(code, reason)`` of the server's close frame, or ``(None, description)`` when none was received."""
        ws = self.ws
        rcvd = ws.close_rcvd
        if rcvd is not None:
            return rcvd.code, rcvd.reason
        sent = ws.close_sent
        if sent is not None and sent.code not in (1000, 1006):
            # websockets failed the connection on what the server sent (a message over max_size, a protocol
            # error): say what, with the close code it sent
            return None, f"closed by the client: {sent.reason or 'protocol error'} (code {sent.code})"
        return None, "connection dropped (no close frame)"

    async def close(self, code: int, reason: str, timeout: float) -> None:
        """The closing handshake: a close frame (unless one was sent already), then until the server closes
        the TCP connection, at most ``timeout`` (then the transport is aborted)."""
        transport = self.transport
        if transport is None or self.lost.done():
            return
        if self.ws.state is _OPEN:
            with contextlib.suppress(Exception):
                self.ws.send_close(code, reason)
                self.send_data()
        elif not self.opened:
            transport.abort()  # (no handshake to close: the upgrade never completed)
        try:
            await asyncio.wait_for(asyncio.shield(self.lost), timeout)
        except asyncio.TimeoutError:
            transport.abort()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


__all__ = ["MAX_FRAGMENTS", "WRITE_LIMIT", "Owner", "Socket"]
