"""A server that accepts TCP connections and never answers the WebSocket handshake (the Toxiproxy ``timeout``
toxic from the first byte, as LiveKit's ``test_tts_stream_timeout`` uses; a proxy that accepts and never
answers). ``async with SilentServer() as srv``: point a client at ``srv.url`` (``ws://127.0.0.1:<port>``, a
base URL every provider accepts); ``srv.connections`` counts the TCP connections accepted, ``srv.requests``
the bytes each one sent (its upgrade request)."""

from __future__ import annotations

import asyncio
import contextlib


class SilentServer:
    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        received = bytearray()
        with contextlib.suppress(ConnectionError):
            while chunk := await reader.read(65536):  # read until the client gives up; never write
                received += chunk
        self.requests.append(bytes(received))
        writer.close()

    async def __aenter__(self) -> SilentServer:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5.0)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"ws://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
