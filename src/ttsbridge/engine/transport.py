"""Opening the byte stream a :class:`~ttsbridge.engine.socket.Socket` runs on: TCP, through a proxy when one is
set (an HTTP ``CONNECT`` tunnel, or SOCKS with ``python-socks`` installed), then TLS for ``wss://``.

The caller says which proxy (resolved by :func:`ttsbridge.engine.proxy.proxy_for`: the environment's rules live
there) and which TLS context (:func:`ttsbridge.engine.tls.client_context`, built off the loop). The bound on
all of it is the caller's (the connection's one connect timeout). Failures are :class:`OSError`: the
connection reports them as network errors, with the proxy's answer in the text (never its credentials), and a
certificate that fails verification as :class:`~ttsbridge.engine.tls.TTSCertificateError`.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import urllib.parse
from collections.abc import Callable
from typing import TypeVar

from websockets.uri import WebSocketURI

from ttsbridge.engine.tls import client_context

__all__ = ["ProxyRefused", "open_transport"]

P = TypeVar("P", bound=asyncio.Protocol)

#: The longest proxy answer read (status line and headers).
_MAX_ANSWER = 16 * 1024


class ProxyRefused(ConnectionError):
    """The proxy did not open the tunnel (its status line is the message)."""


class _Tunnel(asyncio.Protocol):
    """The client side of an HTTP ``CONNECT``: resolves :attr:`answer` with the proxy's status code."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._buffer = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        head, sep, _ = self._buffer.partition(b"\r\n\r\n")
        if not sep:
            if len(self._buffer) > _MAX_ANSWER and not self.answer.done():
                self.answer.set_exception(ProxyRefused("the proxy's answer is too long"))
            return
        if not self.answer.done():
            self.answer.set_result(head.split(b"\r\n", 1)[0].decode("latin-1"))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(ProxyRefused("the proxy closed the connection before answering"))


def _connect_request(proxy: urllib.parse.SplitResult, uri: WebSocketURI, user_agent: str) -> bytes:
    host = f"[{uri.host}]" if ":" in uri.host else uri.host
    target = f"{host}:{uri.port}"
    lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}", f"User-Agent: {user_agent}"]
    if proxy.username is not None:
        user = urllib.parse.unquote(proxy.username)
        password = urllib.parse.unquote(proxy.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        lines.append(f"Proxy-Authorization: Basic {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def _through_http_proxy(
    proxy: urllib.parse.SplitResult, uri: WebSocketURI, user_agent: str
) -> asyncio.Transport:
    loop = asyncio.get_running_loop()
    port = proxy.port or (443 if proxy.scheme == "https" else 80)
    tls = await client_context() if proxy.scheme == "https" else None
    transport, tunnel = await loop.create_connection(
        lambda: _Tunnel(_connect_request(proxy, uri, user_agent)),
        proxy.hostname,
        port,
        ssl=tls,
        server_hostname=proxy.hostname if tls is not None else None,
    )
    try:
        status = await tunnel.answer
        parts = status.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit() or not 200 <= int(parts[1]) < 300:
            raise ProxyRefused(f"the proxy refused the tunnel: {status[:200]}")
    except BaseException:
        transport.abort()
        raise
    return transport


async def _through_socks_proxy(url: str, uri: WebSocketURI) -> object:
    try:
        from python_socks.async_.asyncio import Proxy as SocksProxy
    except ImportError:
        raise ProxyRefused("a SOCKS proxy needs the python-socks package") from None
    return await SocksProxy.from_url(url).connect(uri.host, uri.port)


async def open_transport(
    uri: WebSocketURI,
    proxy: str | None,
    factory: Callable[[], P],
    user_agent: str,
    tls: ssl.SSLContext | None,
) -> P:
    """Open ``uri``'s byte stream (through the proxy URL ``proxy``, None: direct; with ``tls`` for ``wss://``)
    and start ``factory()``'s protocol on it."""
    loop = asyncio.get_running_loop()
    tls = tls if uri.secure else None
    hostname = uri.host if tls is not None else None
    if proxy is None:
        _, protocol = await loop.create_connection(
            factory, uri.host, uri.port, ssl=tls, server_hostname=hostname
        )
        return protocol
    parsed = urllib.parse.urlsplit(proxy)
    if parsed.scheme.startswith("socks"):
        sock = await _through_socks_proxy(proxy, uri)
        _, protocol = await loop.create_connection(factory, sock=sock, ssl=tls, server_hostname=hostname)
        return protocol
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ProxyRefused(f"unsupported proxy scheme {parsed.scheme!r} (http, https, socks5h...)")
    transport = await _through_http_proxy(parsed, uri, user_agent)
    protocol = factory()
    try:
        if tls is not None:
            transport.set_protocol(protocol)
            tls_transport = await loop.start_tls(transport, protocol, tls, server_hostname=hostname)
            assert tls_transport is not None
            transport = tls_transport  # type: ignore[assignment]
        else:
            transport.set_protocol(protocol)
    except BaseException:
        transport.abort()
        raise
    protocol.connection_made(transport)
    return protocol
