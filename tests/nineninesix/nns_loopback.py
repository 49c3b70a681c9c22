"""A small real loopback WebSocket server for the Nineninesix client tests that need frames the emulator cannot
send (malformed fields, unsolicited errors, a flood behind a close reply).

It speaks just enough of the API: every text frame the client sends is parsed as JSON and handed to the
test's ``on_message(ws, message)``, which answers with whatever frames it likes (``send_json``). The client
connects to it exactly as to the real service (``base_url=server.base_url``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

OnMessage = Callable[[ServerConnection, dict[str, Any]], Awaitable[None]]

API_KEY = "sk_996_loopback_test_key"
#: Long on purpose: the server never gives up on a half-closed socket before a test's bounded wait does, so a
#: socket the client leaves half-closed is seen as open.
SERVER_CLOSE_TIMEOUT = 20.0


async def send_json(ws: ServerConnection, frame: dict[str, Any]) -> None:
    await ws.send(json.dumps(frame))


def chunk(context_id: Any, pcm: bytes = b"\x01\x00" * 160) -> dict[str, Any]:
    return {
        "type": "chunk",
        "context_id": context_id,
        "done": False,
        "status_code": 206,
        "data": base64.b64encode(pcm).decode(),
    }


def done(context_id: Any) -> dict[str, Any]:
    return {"type": "done", "context_id": context_id, "done": True, "status_code": 200}


class LoopbackServer:
    """``async with LoopbackServer(on_message) as srv``: ``srv.base_url``, ``srv.open_connections``."""

    def __init__(self, on_message: OnMessage) -> None:
        self._on_message = on_message
        self._server: Server | None = None
        self.messages: list[dict[str, Any]] = []
        self._open: set[ServerConnection] = set()

    async def _handler(self, ws: ServerConnection) -> None:
        self._open.add(ws)
        try:
            with contextlib.suppress(ConnectionClosed):
                async for raw in ws:
                    msg = json.loads(raw)
                    self.messages.append(msg)
                    await self._on_message(ws, msg)
            await ws.wait_closed()  # until the TCP connection is gone, however long the client takes
        finally:
            self._open.discard(ws)

    async def __aenter__(self) -> LoopbackServer:
        self._server = await serve(
            self._handler, "127.0.0.1", 0, ping_interval=None, close_timeout=SERVER_CLOSE_TIMEOUT
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(self._server.wait_closed(), SERVER_CLOSE_TIMEOUT + 5.0)

    @property
    def base_url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"http://127.0.0.1:{port}"

    @property
    def open_connections(self) -> int:
        """Connections whose TCP connection is not closed yet (OPEN, or half-closed in CLOSING)."""
        return sum(1 for c in self._open if c.state is not State.CLOSED)


def client_tasks() -> list[asyncio.Task[Any]]:
    """Live tasks of the client under test: ours (``nineninesix-*``) and its websockets connections' (keepalive,
    close), told from the loopback server's own by the connection object they run for."""
    out = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        frame = getattr(task.get_coro(), "cr_frame", None)
        owner = frame.f_locals.get("self") if frame is not None else None
        if task.get_name().startswith("nineninesix-") or isinstance(owner, ClientConnection):
            out.append(task)
    return out


async def no_client_tasks_left() -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let already-cancelled tasks unwind
    assert client_tasks() == []


async def collect(it: Any, timeout: float = 5.0) -> bytes:
    """All the audio of a context or turn, bounded as a whole by ``timeout``."""

    async def run() -> bytes:
        out = bytearray()
        async for pcm in it:
            out += pcm
        return bytes(out)

    return await asyncio.wait_for(run(), timeout)
