"""The engine's socket: websockets' asyncio client connection, its parsed messages handed on as they come.

:class:`Socket` is made by ``websockets.asyncio.client.connect(create_connection=...)``. In the transport's
``data_received`` it gives each data message (a fragmented one put back together) to its owner, the
engine's :class:`~ttsbridge.engine.connection.Connection`, instead of queueing it for ``recv()``: no reader
task, no message assembler. The handshake, control frames (ping, pong, close) and the close handshake stay
websockets' own. The owner hears of a new read (:meth:`new_read`), of every message (:meth:`incoming`) and of
the server's close frame or the transport's end (:meth:`transport_lost`).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from websockets.asyncio.client import ClientConnection
from websockets.client import ClientProtocol
from websockets.frames import CloseCode, Frame, Opcode

logger = logging.getLogger("ttsbridge.engine")

#: Frames of one fragmented message (websockets' own assembler's limit).
MAX_FRAGMENTS = 4096

_TEXT, _BINARY, _CONT, _PONG = Opcode.TEXT, Opcode.BINARY, Opcode.CONT, Opcode.PONG


class Owner(Protocol):
    """What a :class:`Socket` tells the engine's connection."""

    name: str

    def new_read(self) -> None: ...

    def incoming(self, data: bytes, text: bool) -> None: ...

    def transport_lost(self) -> None: ...

    def pong(self, data: bytes) -> None: ...


class Socket(ClientConnection):
    """websockets' client connection with its messages handed to ``owner.incoming`` as they are parsed
    (instead of queued for ``recv()``); control frames, the handshake and the close handshake are websockets'
    own. The server's close frame and the end of the transport are reported to ``owner.transport_lost``."""

    def __init__(self, protocol: ClientProtocol, *, owner: Owner, **kwargs: Any) -> None:
        super().__init__(protocol, **kwargs)
        self.owner = owner
        self._parts: list[bytes] = []  # the frames so far of a fragmented message
        self._text = False

    def data_received(self, data: bytes) -> None:
        owner = self.owner
        owner.new_read()
        super().data_received(data)
        protocol = self.protocol
        if (protocol.close_rcvd is not None or protocol.parser_exc is not None) and self.opened:
            # the server's close frame (what came before it was handled first), or a frame websockets
            # refused (over max_size, a protocol error: it failed the connection): the turns end now
            owner.transport_lost()

    def process_event(self, event: Any) -> None:
        if self.response is None or type(event) is not Frame or event.opcode > _BINARY:
            super().process_event(event)  # the handshake response, control frames
            if type(event) is Frame and event.opcode is _PONG:
                self.owner.pong(bytes(event.data))
            return
        op = event.opcode
        if op is _CONT:
            self._parts.append(event.data)
            if not event.fin:
                if len(self._parts) > MAX_FRAGMENTS:  # what websockets' own assembler refuses
                    self._parts = []
                    self.protocol.fail(CloseCode.MESSAGE_TOO_BIG, "too many fragments")
                    self.send_data()
                return
            data = b"".join(self._parts)
            self._parts = []
            text = self._text
        elif not event.fin:
            self._parts, self._text = [event.data], op is _TEXT
            return
        else:
            data, text = event.data, op is _TEXT
            if not text and type(data) is not bytes:  # websockets may hand over a bytearray
                data = bytes(data)
        try:
            self.owner.incoming(data, text)
        except Exception:  # never into asyncio's transport (it would abort the socket mid-read)
            logger.exception("%s: failed to handle a message", self.owner.name)

    @property
    def opened(self) -> bool:
        """The opening handshake succeeded (before that, a failure is ``connect()``'s to report)."""
        return self.response is not None and self.protocol.handshake_exc is None

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if self.opened:
            self.owner.transport_lost()


__all__ = ["MAX_FRAGMENTS", "Owner", "Socket"]
