"""The engine's connection through an HTTP proxy (``ConnectionSettings.proxy``): a real loopback CONNECT proxy
between the engine and the toy server; given as a URL, read from the environment (``proxy=True``), or
refused by the proxy (a typed connection error naming its answer, never its credentials)."""

from __future__ import annotations

import asyncio
import base64
import contextlib

import pytest
from engine_toy import ToyProtocol, ToyServer

from ttsbridge.engine.connection import Connection
from ttsbridge.engine.proxy import proxy_for
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError


class ConnectProxy:
    """``CONNECT host:port`` -> a TCP tunnel (or ``refuse`` with that status line). ``requests`` holds each
    CONNECT request's head."""

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.requests: list[str] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.requests.append(head)
        if self.refuse is not None:
            writer.write(f"HTTP/1.1 {self.refuse}\r\nContent-Length: 0\r\n\r\n".encode())
            writer.close()
            return
        host, port = head.split(" ", 2)[1].rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def __aenter__(self) -> ConnectProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 5.0)

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://user:pa%40ss@127.0.0.1:{self._server.sockets[0].getsockname()[1]}"


async def speak_through(conn: Connection) -> bytes:
    await conn.connect()
    stream = TurnStream()
    conn.protocol.open_turn("a", None, conn.now())
    conn.attach("a", stream)
    conn.protocol.send_text("a", "via proxy", conn.now())
    conn.protocol.end_turn("a", conn.now())
    await conn.flush()

    async def run() -> bytes:
        return b"".join([pcm async for pcm in stream])

    try:
        return await asyncio.wait_for(run(), 5.0)
    finally:
        await conn.close()


async def test_a_connection_goes_through_the_proxy_given_as_a_url() -> None:
    async with ToyServer() as srv, ConnectProxy() as proxy:
        conn = Connection(ToyProtocol(srv.url), ConnectionSettings(proxy=proxy.url), name="toy-proxy")
        assert await speak_through(conn) == b"via proxy"
        (head,) = proxy.requests
        target = srv.url.split("//", 1)[1].split("/", 1)[0]
        assert head.startswith(f"CONNECT {target} HTTP/1.1")
        assert f"Proxy-Authorization: Basic {base64.b64encode(b'user:pa@ss').decode()}" in head


async def test_the_proxy_is_read_from_the_environment_unless_it_is_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with ToyServer() as srv, ConnectProxy() as proxy:
        for name in ("no_proxy", "NO_PROXY", "ws_proxy", "socks_proxy", "https_proxy", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
            monkeypatch.delenv(name.upper(), raising=False)
        monkeypatch.setenv("http_proxy", proxy.url)
        env = Connection(ToyProtocol(srv.url), ConnectionSettings(proxy=True), name="toy-env")
        assert await speak_through(env) == b"via proxy" and len(proxy.requests) == 1
        direct = Connection(ToyProtocol(srv.url), ConnectionSettings(proxy=None), name="toy-direct")
        assert await speak_through(direct) == b"via proxy" and len(proxy.requests) == 1  # not through it


async def test_a_proxy_that_refuses_the_tunnel_is_a_connection_error_naming_its_answer() -> None:
    async with ToyServer() as srv, ConnectProxy(refuse="407 Proxy Authentication Required") as proxy:
        conn = Connection(ToyProtocol(srv.url), ConnectionSettings(proxy=proxy.url), name="toy-proxy")
        with pytest.raises(TTSConnectionError, match="407 Proxy Authentication Required") as info:
            await conn.connect()
        assert "pa@ss" not in str(info.value) and "pa%40ss" not in str(info.value)
        assert conn.closed


def test_a_bad_proxy_setting_is_refused_naming_the_field() -> None:
    with pytest.raises(TTSInvalidOptionError, match="proxy"):
        ConnectionSettings(proxy="127.0.0.1:8080")  # type: ignore[arg-type]


def test_one_set_of_environment_rules_for_websockets_and_http(monkeypatch: pytest.MonkeyPatch) -> None:
    """``proxy_for`` is the one reader of the environment (the transport's and the HTTP calls'): websockets'
    order for ws/wss (WSS_PROXY / WS_PROXY first, then SOCKS, then HTTPS_PROXY, and HTTP_PROXY for ws://),
    the scheme's own proxy for http/https, NO_PROXY for all; an explicit proxy wins, None and False are direct."""
    for name in (
        "no_proxy",
        "ws_proxy",
        "wss_proxy",
        "socks_proxy",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.setenv("https_proxy", "http://secure.proxy:3128")
    monkeypatch.setenv("http_proxy", "http://plain.proxy:3128")
    assert proxy_for("wss://api.example.com/tts") == "http://secure.proxy:3128"
    assert proxy_for("ws://api.example.com/tts") == "http://secure.proxy:3128"  # HTTPS before HTTP
    assert proxy_for("https://api.example.com/tts") == "http://secure.proxy:3128"
    assert proxy_for("http://api.example.com/tts") == "http://plain.proxy:3128"
    monkeypatch.setenv("wss_proxy", "http://ws.proxy:8080")
    assert proxy_for("wss://api.example.com/tts") == "http://ws.proxy:8080"
    assert proxy_for("https://api.example.com/tts") == "http://secure.proxy:3128"  # not the WebSockets' one
    monkeypatch.setenv("no_proxy", "api.example.com")
    assert proxy_for("wss://api.example.com/tts") is None and proxy_for("https://api.example.com") is None
    assert proxy_for("wss://other.example.com/tts") == "http://ws.proxy:8080"
    assert (
        proxy_for("wss://api.example.com", "http://mine:1") == "http://mine:1"
    )  # explicit wins, NO_PROXY too
    assert proxy_for("wss://other.example.com", None) is None
    assert ConnectionSettings(proxy=False).proxy is None
