"""asyncio WebSocket client for Nineninesix: pooled connections carrying many contexts; the dialer of its turns.

Thin over the engine: each connection is a :class:`~ttsbridge.nineninesix.connection.NineninesixConnection`
(an engine :class:`~ttsbridge.engine.connection.Connection` driving one
:class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`), pooled by output format in a
:class:`~ttsbridge.engine.pool.KeyedPool` (``output_format`` is fixed per connection by the API, so every context
with the same format shares one socket, reused across turns, replaced before a server idle close, and replaced at
once when it drops). No turn state here: a context is an :class:`~ttsbridge.engine.turn.EngineTurn` whose facts
(:class:`~.facts.ContextFacts`) the protocol writes. The API key travels in the URL (``?api_key=``) as the API
requires; it never reaches a log line, an exception text or a repr.
"""

from __future__ import annotations

import ssl as ssl_module
import uuid
from typing import Any

from ttsbridge._redact import mask_key
from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.connection import PING_AFTER_SILENCE, PONG_TIMEOUT, USER_AGENT, check_liveness_knobs
from ttsbridge.engine.pool import KeyedPool
from ttsbridge.engine.proxy import check_proxy
from ttsbridge.engine.turn import EngineTurn, Link
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.nineninesix.catalog import API_KEY_ENV, derive_urls, resolve_api_key, ws_url
from ttsbridge.nineninesix.connection import CLOSE_TIMEOUT, ConnectSettings, NineninesixConnection
from ttsbridge.nineninesix.facts import NineninesixRequest
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, OutputFormat
from ttsbridge.nineninesix.protocol import NineninesixProtocol


class NineninesixClient:
    """Framework-free Nineninesix WebSocket client.

    >>> client = NineninesixClient(api_key="sk_996_...")           # or $NINENINESIX_API_KEY
    >>> ctx = await client.open_context(OutputFormat(sample_rate=16000), voice="...")  # an EngineTurn
    >>> await ctx.send("Hello there. "); await ctx.end()
    >>> async for pcm in ctx: ...

    Args:
        base_url: one URL from which the ws(s) URL is derived (``https://`` -> ``wss://``).
        cancel_ack: open connections with ``?cancel_ack=true``: ``cancel()`` returns once the server confirms.
        connect_timeout: bound on the handshake.
        cancel_timeout: bound on waiting for a cancel acknowledgement.
        receive_timeout: a context fails with TTSTimeoutError when the server owes audio (text sent or turn
            ended) and sends nothing for this long.
        max_idle: a pooled connection unused for this long is replaced before the next context, so a server
            idle close can never fail a turn.
        ping_interval: an idle pooled connection silent this long gets a keepalive ping; None disables.
        ping_after_silence: a connection the server owes audio (or a cancel's answer) that has been silent this
            long gets a WebSocket ping, and so does a turn's first request to a connection silent this long;
            None disables the check (then only ``receive_timeout`` notices a dead connection).
        pong_timeout: nothing at all (pong, audio) within this long after such a ping: the connection is dead,
            its contexts fail with :class:`~ttsbridge.errors.TTSSilentConnectionError` (a turn with no audio
            yet is replayed once on a fresh connection) and the pool opens a new one. A timeout
            (``receive_timeout``) sends the same ping: no new turn goes to that connection until it answers.
        proxy: ``True`` (default): from the environment (``WSS_PROXY``/``HTTPS_PROXY``, ``NO_PROXY``); ``None``:
            direct; a URL (``http://proxy:3128``): that proxy, whatever the environment says.
        ssl: the TLS context for ``wss://`` (default: the shared verifying context, docs/production.md).
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        cancel_ack: bool = True,
        connect_timeout: float = 10.0,
        cancel_timeout: float = 2.0,
        receive_timeout: float = 15.0,
        max_idle: float = 60.0,
        ping_interval: float | None = 20.0,
        ping_after_silence: float | None = PING_AFTER_SILENCE,
        pong_timeout: float = PONG_TIMEOUT,
        proxy: str | bool | None = True,
        ssl: ssl_module.SSLContext | None = None,
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        self.base_url = base_url
        self.http_base, _ = derive_urls(base_url)
        self.cancel_ack = cancel_ack
        for name, val in (
            ("connect_timeout", connect_timeout),
            ("cancel_timeout", cancel_timeout),
            ("receive_timeout", receive_timeout),
            ("max_idle", max_idle),
            ("pong_timeout", pong_timeout),
        ):
            if not val > 0:
                raise TTSInvalidOptionError(name, val, "a number of seconds > 0")
        check_liveness_knobs(ping_interval=ping_interval, ping_after_silence=ping_after_silence)
        self.connect_timeout = connect_timeout
        self.cancel_timeout = cancel_timeout
        self.receive_timeout = receive_timeout
        self.max_idle = max_idle
        self.ping_interval = ping_interval
        self.ping_after_silence = ping_after_silence
        self.pong_timeout = pong_timeout
        self._ws_url = ws_url(base_url, self._api_key, cancel_ack)
        check_proxy(proxy)
        self.settings = ConnectSettings(
            connect_timeout, cancel_timeout, max_idle, ping_interval, ping_after_silence, pong_timeout, proxy, ssl
        )
        self._pool: KeyedPool[OutputFormat, NineninesixConnection] = KeyedPool(
            self._connect, shared=True, name="nineninesix"
        )
        self._serial = 0

    def __repr__(self) -> str:
        return f"NineninesixClient(base_url={self.base_url!r}, api_key={mask_key(self._api_key)})"

    @property
    def ws_url(self) -> str:
        """The connection URL. It holds the key: never log it (use ``redact``)."""
        return self._ws_url

    @property
    def connections_opened(self) -> int:
        return self._pool.opened

    async def open_context(
        self,
        output_format: OutputFormat | None = None,
        *,
        model: str | None = None,
        voice: str | None = None,
        language: str | None = None,
        context_id: str | None = None,
        sample_rate: int | None = None,
        max_retries: int = 0,
        backoff: Backoff | None = None,
        receive_timeout: float | None = None,
        retry: bool = False,
        wait_for_cancel_ack: bool = True,
    ) -> EngineTurn:
        """A turn (one context; a fresh one per retry when ``retry``) on the pooled connection for
        ``output_format`` (connecting if needed), yielding PCM16 at ``sample_rate`` (default: the wire rate).
        ``receive_timeout`` bounds its audio-owed silence (default: the client's)."""
        fmt = output_format or OutputFormat()
        if fmt.container != "raw":
            raise TTSInvalidOptionError(
                "output_format.container", fmt.container, "raw (WebSocket streams raw only)"
            )
        request = NineninesixRequest(
            fmt, model, voice, language, max_retries, backoff, receive_timeout, retry=retry
        )
        turn = EngineTurn(
            self,
            request,
            turn_id=context_id or str(uuid.uuid4()),
            sample_rate=sample_rate or fmt.sample_rate,
            cancel_timeout=self.cancel_timeout,
            wait_for_cancel_ack=wait_for_cancel_ack,
        )
        return await turn.open()

    async def dial(self, turn_id: str, request: NineninesixRequest, *, retry: bool) -> tuple[Link, bool]:
        """The turns' dialer: the pooled connection for the request's format (a retry's too: the same socket
        while it is usable), and whether it was already open."""
        opened_before = self.connections_opened
        conn = await self._pool.acquire(request.output_format)
        return conn, self.connections_opened == opened_before

    def hang_up(self, link: Any, *, cancelled: bool) -> None:
        """A shared connection outlives its turns (the pool replaces or closes it)."""

    async def prewarm(self, output_format: OutputFormat | None = None) -> None:
        """Open (or refresh) the connection for ``output_format`` ahead of the first turn."""
        await self._pool.acquire(output_format or OutputFormat())

    def connection_for(self, output_format: OutputFormat) -> NineninesixConnection | None:
        return self._pool.get(output_format)

    async def _connect(self, fmt: OutputFormat) -> NineninesixConnection:
        self._serial += 1
        protocol = NineninesixProtocol(
            fmt,
            cancel_ack=self.cancel_ack,
            base_url=self.base_url,
            api_key=self._api_key,
            receive_timeout=self.receive_timeout,
            ack_wait=min(0.5, self.cancel_timeout),
            cancel_timeout=self.cancel_timeout,
        )
        conn = NineninesixConnection(protocol, self.settings, self._serial, self._failed)
        await conn.connect()
        return conn

    def _failed(self, conn: NineninesixConnection) -> None:
        self._pool.discard(conn.output_format, conn)

    async def aclose(self) -> None:
        """Close every connection; open contexts fail with :class:`TTSConnectionError`. The client stays
        usable: a later ``open_context`` connects again."""
        await self._pool.aclose()

    async def __aenter__(self) -> NineninesixClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = [
    "API_KEY_ENV",
    "CLOSE_TIMEOUT",
    "USER_AGENT",
    "NineninesixClient",
    "NineninesixConnection",
    "derive_urls",
    "resolve_api_key",
]
