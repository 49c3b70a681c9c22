"""Chirp's loopback server: ``async with ChirpServer() as srv`` serves ``srv.url`` (the API in __init__.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

RATE = 16000
SAMPLES_PER_CHAR = 320  # 0.02 s
LEVEL = 1000  # every sample of a turn's audio (a marker: no stale audio of another turn can pass unseen)


class ChirpServer:
    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.connections = 0
        self._server: Server | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = next(iter(self._server.sockets)).getsockname()[:2]
        return f"ws://{host}:{port}/chirp"

    async def __aenter__(self) -> ChirpServer:
        self._server = await serve(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _serve(self, ws: ServerConnection) -> None:
        self.connections += 1
        cancelled: set[str] = set()
        with contextlib.suppress(ConnectionClosed):
            async for raw in ws:
                msg = json.loads(raw)
                self.received.append(msg)
                turn = msg["turn"]
                if msg.get("cancel"):
                    cancelled.add(turn)
                elif turn in cancelled:
                    continue
                elif "[[stall]]" in msg.get("text", ""):
                    cancelled.add(turn)  # a server that owes audio and stays silent, end included
                elif "[[error]]" in msg.get("text", ""):
                    await ws.send(json.dumps({"turn": turn, "error": "the text asked for an error"}))
                elif "text" in msg:
                    pcm = LEVEL.to_bytes(2, "little", signed=True) * (SAMPLES_PER_CHAR * len(msg["text"]))
                    for start in range(0, len(pcm), 3200):  # 0.1 s per frame
                        await ws.send(turn.encode() + b"\n" + pcm[start : start + 3200])
                        await asyncio.sleep(0.01)  # ten times real time: a barge-in lands mid-turn
                elif msg.get("end"):
                    await ws.send(json.dumps({"turn": turn, "done": True}))
