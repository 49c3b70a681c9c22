"""The emulator's own log of WebSocket connections (both APIs): when each opened and closed, and how.

Tests count sockets on the server side with it (``emu.stats.connections``): how many a client opened, how many
are open now, and how each ended: the client's close frame and its code (``client_code``: 1000 is a clean
close), a close the server started (``server_code``), the server cutting it (``dropped``), or none of these:
the client's TCP connection ended without a close frame, which a provider's server logs as 1006
(:attr:`ConnectionRecord.seen_code`).

:class:`RecordedWebSocket` is the routes' ``web.WebSocketResponse``: it adds a record when the upgrade is
accepted and fills it in as the connection ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import WSMsgType, web

__all__ = ["ABNORMAL", "ConnectionRecord", "RecordedWebSocket"]

#: What a server logs for a connection that ended with no close frame (RFC 6455 7.1.5).
ABNORMAL = 1006


@dataclass
class ConnectionRecord:
    """One accepted WebSocket.

    Attributes:
        api: ``"nineninesix"`` or ``"kitta"``.
        index: its place in the log (0-based, both APIs counted together).
        opened_at / closed_at: ``time.monotonic()`` of the upgrade and of the handler's end (None while open).
        client_code: the code of the client's close frame, when the client closed first.
        server_code: the code of the close frame the server sent first (idle timeout, an error, shutdown).
        dropped: the server cut the TCP connection with no close frame (a fault, ``drop_connections``).
    """

    api: str
    index: int
    opened_at: float
    closed_at: float | None = None
    client_code: int | None = None
    server_code: int | None = None
    dropped: bool = False

    @property
    def open(self) -> bool:
        return self.closed_at is None

    @property
    def seen_code(self) -> int | None:
        """The close as the server saw it: the client's code, the server's own, or 1006 (no close frame came
        and the server sent none); None while open."""
        if self.open:
            return None
        if self.client_code is not None:
            return self.client_code
        if self.server_code is not None:
            return self.server_code
        return ABNORMAL


class RecordedWebSocket(web.WebSocketResponse):
    """A ``WebSocketResponse`` that logs itself in ``log`` (``notify`` wakes the emulator's waiters).

    Built with ``autoclose=False``: a client's close frame is recorded before the reply goes out."""

    def __init__(
        self, log: list[ConnectionRecord], api: str, notify: Callable[[], None], **kwargs: Any
    ) -> None:
        super().__init__(autoclose=False, **kwargs)
        self._log = log
        self._api = api
        self._notify = notify
        self.record: ConnectionRecord | None = None
        self._replying = False

    async def prepare(self, request: web.BaseRequest) -> Any:
        writer = await super().prepare(request)
        if self.record is None:
            self.record = ConnectionRecord(self._api, len(self._log), time.monotonic())
            self._log.append(self.record)
            self._notify()
        return writer

    async def receive(self, timeout: float | None = None) -> Any:
        msg = await super().receive(timeout)
        if msg.type is WSMsgType.CLOSE:
            rec = self.record
            if rec is not None and rec.client_code is None and rec.server_code is None:
                rec.client_code = int(msg.data)
            if not self.closed:  # the reply (what autoclose would send)
                self._replying = True
                await super().close(drain=False)
        return msg

    async def close(self, *, code: int = 1000, message: bytes = b"", drain: bool = True) -> bool:
        rec = self.record
        if rec is not None and not self.closed and rec.client_code is None and rec.server_code is None:
            rec.server_code = int(code)
        return await super().close(code=code, message=message, drain=drain)

    def mark_dropped(self) -> None:
        """The server cut the connection (no close frame)."""
        if self.record is not None:
            self.record.dropped = True

    def finish(self) -> None:
        """The handler is over: the connection is closed."""
        rec = self.record
        if rec is not None and rec.closed_at is None:
            rec.closed_at = time.monotonic()
            self._notify()
