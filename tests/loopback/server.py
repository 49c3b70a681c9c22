"""The loopback server itself: handshake scripts, the built-in (optionally mutated) replies or a test's script,
and the view of the connections a test checks (still open, ended)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from .common import KITTA_SUBPROTOCOL, Mutation
from .kitta import KittaSession, kitta_encode
from .nineninesix import NnsSession, nns_encode

#: the server's own logger (it logs request lines, keys included: it is the server, not the client)
SERVER_LOG = logging.getLogger("loopback.server")

#: a test's answer to one client message (decoded: a dict), in place of the built-in replies
Script = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]


async def send(conn: ServerConnection, frame: dict[str, Any]) -> None:
    """Send ``frame`` in the connection's protocol: MessagePack for Kitta, JSON text for Nineninesix."""
    await conn.send(kitta_encode(frame) if conn.subprotocol == KITTA_SUBPROTOCOL else nns_encode(frame))


def ignore_close(conn: ServerConnection) -> None:
    """The server reads nothing more from ``conn``: it never sees, so never answers, the client's close frame
    (a server that keeps sending and ignores the close handshake). Sends still go out."""
    conn.transport.pause_reading()


#: how many client messages a server keeps for the tests that look at them
MESSAGES_KEPT = 1000


@dataclass
class LoopbackServer:
    """``async with LoopbackServer("nineninesix" | "kitta") as srv:`` then ``srv.base_url``.

    ``script``: every client message goes to ``await script(conn, msg)`` instead of the built-in replies
    (``arm`` then does nothing); a Kitta connection that authenticates by header is still greeted with
    ``authenticated``.
    """

    protocol: str
    script: Script | None = None
    #: how long the server waits for a close to complete (the client's TCP close after the close handshake)
    #: before it aborts the connection; a test that checks the client finishes its closes sets it above the
    #: test's own bound, so a socket the client leaves half-closed stays counted in ``open_connections``
    close_timeout: float = 1.0
    handshake: list[Any] = field(default_factory=list)
    #: (mutation, turn text) of every armed mutation that fired, for reports
    fired: list[Mutation] = field(default_factory=list)
    #: the last ``MESSAGES_KEPT`` messages the clients sent, decoded, in arrival order (bounded: a soak's
    #: server must not grow with the turn count, or the RSS slope measures the test server)
    messages: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MESSAGES_KEPT))
    connections: int = 0
    #: replies started (Nineninesix contexts, Kitta sessions)
    turns: int = 0
    #: Kitta: close the socket after ``finish``; the page's example has the *client* close it, so by default
    #: the server leaves that to the client
    close_after_finish: bool = False
    #: drop the connection as soon as a cancel arrives (Nineninesix)
    drop_on_cancel: bool = False
    #: set to let a ``hold`` mutation's connection read again
    release: asyncio.Event = field(default_factory=asyncio.Event)
    #: set each time a connection has ended (its TCP connection is gone)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    _armed: list[Mutation] = field(default_factory=list)
    _server: Server | None = None
    _open: set[ServerConnection] = field(default_factory=set)

    async def __aenter__(self) -> LoopbackServer:
        sub = [KITTA_SUBPROTOCOL] if self.protocol == "kitta" else None
        self._server = await serve(
            self._handle, "127.0.0.1", 0, subprotocols=sub, process_request=self._process_request,
            max_size=2**20, ping_interval=None, close_timeout=self.close_timeout, logger=SERVER_LOG,
        )  # fmt: skip
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), self.close_timeout + 2.0)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        """Server-side connections whose TCP connection is not closed yet (open, or half-closed while the
        server waits for the client to finish closing)."""
        return sum(1 for c in self._open if c.state is not State.CLOSED)

    def arm(self, *mutations: Mutation) -> None:
        """Mutate the next replies, one mutation each, in order."""
        self._armed = list(mutations)

    def _take(self) -> Mutation | None:
        self.turns += 1
        if not self._armed:
            return None
        m = self._armed.pop(0)
        self.fired.append(m)
        return m

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        self.connections += 1
        if not self.handshake:
            return None
        action = self.handshake.pop(0)
        if action == "drop":
            conn.transport.abort()
            return None
        return Response(int(action), "scripted", Headers([("Retry-After", "0")]), b'{"error":"scripted"}')

    async def _handle(self, conn: ServerConnection) -> None:
        self._open.add(conn)
        try:
            with contextlib.suppress(ConnectionClosed):
                if self.script is not None:
                    await self._scripted(conn, self.script)
                elif self.protocol == "kitta":
                    await KittaSession(self, conn).run()
                else:
                    await NnsSession(self, conn).run()
            await conn.close()  # bounded by close_timeout: returns once the TCP connection is gone
        finally:
            self._open.discard(conn)
            self.closed.set()

    async def _scripted(self, conn: ServerConnection, script: Script) -> None:
        kitta = self.protocol == "kitta"
        if kitta and "authorization" in conn.request.headers:
            await send(conn, {"event": "authenticated"})
        async for raw in conn:
            msg = msgpack.unpackb(raw, raw=False) if kitta else json.loads(raw)
            self.messages.append(msg)
            await script(conn, msg)


def client_tasks(prefix: str) -> list[asyncio.Task[Any]]:
    """Live tasks of the client under test: its own (named ``prefix...``) and its websockets connections'
    (keepalive, close), told from this server's by the connection object they run for."""
    out = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        frame = getattr(task.get_coro(), "cr_frame", None)
        owner = frame.f_locals.get("self") if frame is not None else None
        if task.get_name().startswith(prefix) or isinstance(owner, ClientConnection):
            out.append(task)
    return out


async def no_client_tasks_left(prefix: str) -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let already-cancelled tasks unwind
    assert client_tasks(prefix) == []


async def collect(it: Any, timeout: float = 5.0) -> bytes:
    """All the audio of a context or turn, bounded as a whole by ``timeout``."""

    async def run() -> bytes:
        out = bytearray()
        async for pcm in it:
            out += pcm
        return bytes(out)

    return await asyncio.wait_for(run(), timeout)
