"""A raw WebSocket server for the engine's reading tests: after the handshake (answered with ``after_101``
written in the same segment), ``script(reader, writer)`` writes whatever bytes it likes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

from websockets.frames import Close, Frame, Opcode

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def text_frame(obj: Any) -> bytes:
    return Frame(Opcode.TEXT, json.dumps(obj).encode()).serialize(mask=False)


def close_frame(code: int = 1000, reason: str = "bye") -> bytes:
    return Frame(Opcode.CLOSE, Close(code, reason).serialize()).serialize(mask=False)


class RawServer:
    def __init__(self, script: Script, after_101: bytes = b"") -> None:
        self.script, self.after_101 = script, after_101
        self.url = ""

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        req = await reader.readuntil(b"\r\n\r\n")
        key = next(
            line.split(b":", 1)[1].strip()
            for line in req.split(b"\r\n")
            if line.lower().startswith(b"sec-websocket-key")
        )
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest())
        writer.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n" + self.after_101
        )
        try:
            await self.script(reader, writer)
        finally:
            writer.close()

    async def __aenter__(self) -> RawServer:
        self._srv = await asyncio.start_server(self._conn, "127.0.0.1", 0)
        self.url = f"ws://127.0.0.1:{self._srv.sockets[0].getsockname()[1]}/toy"
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._srv.close()
