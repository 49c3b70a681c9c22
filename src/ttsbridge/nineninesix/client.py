"""asyncio WebSocket client for Nineninesix: pooled connections carrying many contexts.

A thin I/O loop around :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`. ``output_format`` is
fixed per connection by the API, so connections are pooled by format: every context with the same format
shares one socket, which is reused across turns, replaced before a server idle close, and replaced at once when it
drops. The API key travels in the URL (``?api_key=``) as the API requires; it never reaches a log line, an
exception text or a repr.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.protocol import State

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import mask_key, redact, register_secret
from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.nineninesix.frames import NineninesixProtocolError
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, OutputFormat
from ttsbridge.nineninesix.protocol import (
    PROVIDER,
    AudioReceived,
    ConnectionFailed,
    ContextDone,
    ContextFailed,
    ContextState,
    Event,
    NineninesixProtocol,
)

logger = logging.getLogger("ttsbridge.nineninesix")

API_KEY_ENV = "NINENINESIX_API_KEY"
USER_AGENT = "ttsbridge/0.1"
#: Bound on a closing handshake: after it websockets aborts the TCP connection, so no socket lingers CLOSING.
CLOSE_TIMEOUT = 2.0


def resolve_api_key(api_key: str | None) -> str:
    key = api_key or os.environ.get(API_KEY_ENV)
    register_secret(key)
    if not key:
        raise TTSInvalidOptionError(
            "api_key", None, f"a Nineninesix key (sk_996_...), passed as api_key= or set in ${API_KEY_ENV}"
        )
    return key


def derive_urls(base_url: str) -> tuple[str, str]:
    """``(http_base, ws_base)`` from one base URL (http/https/ws/wss), without a trailing slash."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise TTSInvalidOptionError("base_url", base_url, "an http(s):// or ws(s):// URL with a host")
    secure = scheme in ("https", "wss")
    path = parts.path.rstrip("/")
    http = urlunsplit(("https" if secure else "http", parts.netloc, path, "", ""))
    ws = urlunsplit(("wss" if secure else "ws", parts.netloc, path, "", ""))
    return http, ws


class _End:
    """Queue marker: the context finished (``error`` set when it failed)."""

    __slots__ = ("error",)

    def __init__(self, error: TTSBridgeError | None = None) -> None:
        self.error = error


class NineninesixContext:
    """One server context (one turn). Created by :meth:`NineninesixClient.open_context`.

    ``send`` streams text with ``continue: true``, ``end`` sends the closing ``continue: false``, ``cancel``
    stops it (waiting for the server's acknowledgement, bounded), and ``async for pcm in ctx`` yields PCM16
    at :attr:`sample_rate` (the wire rate; μ-law/A-law already decoded) until ``done``. Iteration raises the
    context's error if it failed, and :class:`TTSTimeoutError` if the server goes silent on text it owes.
    """

    def __init__(
        self,
        conn: _Connection,
        context_id: str,
        *,
        model: str | None,
        voice: str | None,
        language: str | None,
    ) -> None:
        self._conn = conn
        self.id = context_id
        self.output_format = conn.output_format
        self.sample_rate = conn.output_format.sample_rate
        self._kw: dict[str, Any] = {"model": model, "voice": voice, "language": language}
        self._queue: asyncio.Queue[bytes | _End] = asyncio.Queue()
        self._finished = asyncio.Event()
        self._error: TTSBridgeError | None = None
        self._cancelled = False
        self._last_sent = 0.0
        self._last_heard = time.monotonic()
        self.characters_sent = 0
        #: Requests handed to the socket for this context (0: the server cannot have heard of it).
        self.requests_sent = 0
        self.audio_bytes = 0
        self.connection_reused = False

    def __repr__(self) -> str:
        return f"NineninesixContext(id={self.id!r}, state={self.state.value})"

    @property
    def state(self) -> ContextState:
        return self._conn.protocol.state(self.id) or (
            ContextState.CANCELLED if self._cancelled else ContextState.FAILED
        )

    @property
    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def error(self) -> TTSBridgeError | None:
        return self._error

    async def send(self, text: str) -> None:
        """Stream ``text`` into the context (``continue: true``)."""
        await self._send(text, continue_=True)

    async def end(self, text: str = "") -> None:
        """End the turn (``continue: false``); the server sends ``done`` after the queued text renders."""
        await self._send(text, continue_=False)

    async def _send(self, text: str, *, continue_: bool) -> None:
        if self._error is not None:
            raise self._error
        if self._cancelled:
            raise TTSBridgeError(f"context {self.id} was cancelled")
        frame = self._conn.protocol.generation(self.id, text, continue_=continue_, **self._kw)
        if self._conn.writable():
            self.requests_sent += 1  # from here the server may hear of this context (else send() raises)
        await self._conn.send(frame)
        self.characters_sent += len(text)
        self._last_sent = time.monotonic()

    async def cancel(self, timeout: float | None = None, *, wait: bool = True) -> None:
        """Stop generation; no audio is yielded after this returns. Idempotent; never raises.

        With ``cancel_ack`` (the default) it waits, bounded by ``timeout`` (client's ``cancel_timeout``),
        for the server's ``done`` with ``cancelled: true``, so the context is really over before the next
        turn starts; ``wait=False`` sends the cancel and returns (the late acknowledgement is dropped).
        """
        if self._finished.is_set():
            return
        first = not self._cancelled
        self._cancelled = True
        if first:
            self._queue.put_nowait(_End())  # wake the consumer: it stops without yielding more
        await self._stop_on_server(
            self._conn.client.cancel_timeout if timeout is None else timeout, wait=wait
        )

    async def _stop_on_server(self, timeout: float, *, wait: bool = True) -> None:
        """Send the cancel (once) and, with ``cancel_ack``, wait up to ``timeout`` for its answer; then finish."""
        proto = self._conn.protocol
        if proto.drop_unsent(self.id):  # the server never heard of this context: nothing to cancel there
            self._finish(None)
            return
        frame = proto.cancel(self.id) if self.id in proto.contexts else None
        if frame is None:
            if wait and proto.cancel_ack and proto.state(self.id) is ContextState.CANCELLING:
                # another cancel() sent it: wait for the same acknowledgement
                await self._wait_finished(timeout)
            self._finish(None)
            return
        try:
            # bounded too: a socket whose send buffer is full must not hold a barge-in up
            await asyncio.wait_for(self._conn.send(frame), timeout)
        except (TTSBridgeError, asyncio.TimeoutError):
            self._finish(None)
            return
        if wait and proto.cancel_ack:
            await self._wait_finished(timeout)
        self._finish(None)

    async def _wait_finished(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._finished.wait(), timeout)
        except asyncio.TimeoutError:
            logger.warning(
                "nineninesix: no cancel acknowledgement for context %s within %.1fs", self.id, timeout
            )

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        timeout = self._conn.client.receive_timeout
        try:
            while True:
                if self._cancelled:
                    return
                if self._finished.is_set() and self._queue.empty():  # iterated again after its end
                    if self._error is not None:
                        raise self._error
                    return
                try:
                    # fast path: no timer task when audio is already queued
                    item = self._queue.get_nowait() if self._queue.qsize() else None
                    if item is None:
                        item = await asyncio.wait_for(self._queue.get(), self._wait_budget(timeout))
                except asyncio.TimeoutError:
                    if self._queue.qsize() or self._finished.is_set() or not self._overdue(timeout):
                        continue
                    err = TTSTimeoutError(
                        f"nineninesix: no audio for context {self.id} within {timeout:.1f}s"
                    )
                    self._error = err
                    # cancel it on the server (bounded): the context must not go on generating unheard
                    await self._stop_on_server(min(0.5, self._conn.client.cancel_timeout))
                    raise err from None
                if self._cancelled:
                    return
                if isinstance(item, _End):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            if not self._finished.is_set() and not self._cancelled:
                # The consumer left early (break, or its task was cancelled): nobody will read this context.
                await self.cancel(wait=False)

    def _owed(self) -> bool:
        """True when the server owes us something: text sent since we last heard, or the end of the turn."""
        state = self._conn.protocol.state(self.id)
        return state is ContextState.ENDING or self._last_sent > self._last_heard

    def _overdue(self, timeout: float) -> bool:
        """True when the server owes us something and has been silent for ``timeout`` since it began to."""
        return self._owed() and time.monotonic() - max(self._last_sent, self._last_heard) >= timeout

    def _wait_budget(self, timeout: float) -> float:
        if not self._owed():
            return timeout
        since = max(self._last_sent, self._last_heard)
        return max(0.01, since + timeout - time.monotonic())

    # --- called by the connection's reader ---------------------------------------------------------------

    def _on_event(self, ev: Event) -> None:
        self._last_heard = time.monotonic()
        if isinstance(ev, AudioReceived):
            if not self._cancelled:
                self.audio_bytes += len(ev.pcm)
                self._queue.put_nowait(ev.pcm)
        elif isinstance(ev, ContextDone):
            self._finish(None)
        elif isinstance(ev, ContextFailed):
            self._fail(ev.error)

    def _fail(self, err: TTSBridgeError) -> None:
        if self._finished.is_set():
            return
        self._error = err
        self._finish(err)

    def _finish(self, err: TTSBridgeError | None) -> None:
        if self._finished.is_set():
            return
        self._finished.set()
        self._queue.put_nowait(_End(err))
        self._conn.forget(self.id)


class _Connection:
    """One WebSocket, one output format, many contexts."""

    def __init__(self, client: NineninesixClient, output_format: OutputFormat, serial: int) -> None:
        self.client = client
        self.output_format = output_format
        self.serial = serial
        self.protocol = NineninesixProtocol(output_format, cancel_ack=client.cancel_ack)
        self.contexts: dict[str, NineninesixContext] = {}
        self.ws: ClientConnection | None = None
        self.last_used = time.monotonic()
        self.opened_at = time.monotonic()
        self._reader: asyncio.Task[None] | None = None
        self._closer: asyncio.Task[None] | None = None
        self._send_lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"_Connection(#{self.serial}, {self.output_format.encoding}@{self.output_format.sample_rate})"

    @property
    def dead(self) -> bool:
        return self.protocol.closed

    def writable(self) -> bool:
        """Open and not closing: a frame sent now is written. (A close frame may have arrived before the
        reader saw it: the websockets state knows at once.)"""
        return self.ws is not None and not self.dead and self.ws.state is State.OPEN

    def idle_for(self) -> float:
        return time.monotonic() - self.last_used

    async def connect(self) -> None:
        url = self.client.ws_url
        safe = redact(url, (self.client._api_key,))
        logger.debug("nineninesix: connecting %s", safe)
        try:
            self.ws = await asyncio.wait_for(
                connect(
                    url,
                    user_agent_header=USER_AGENT,
                    open_timeout=None,
                    close_timeout=CLOSE_TIMEOUT,
                    max_size=8 * 2**20,
                    ping_interval=self.client.ping_interval,
                    ping_timeout=self.client.ping_interval,
                    logger=RedactingLogger(
                        logging.getLogger("ttsbridge.websockets"), (self.client._api_key,)
                    ),
                ),
                self.client.connect_timeout,
            )
        except asyncio.TimeoutError:
            raise TTSTimeoutError(
                f"nineninesix: connecting to {safe} timed out after {self.client.connect_timeout:.1f}s"
            ) from None
        except InvalidStatus as exc:
            raise _handshake_error(exc, self.client._api_key) from None
        except (InvalidHandshake, InvalidURI, OSError) as exc:
            raise TTSConnectionError(
                f"nineninesix: cannot connect to {safe}: {type(exc).__name__}: "
                f"{redact(exc, (self.client._api_key,))}"
            ) from None
        self.opened_at = self.last_used = time.monotonic()
        self._reader = asyncio.get_running_loop().create_task(
            self._read_loop(), name=f"nineninesix-reader-{self.serial}"
        )

    async def send(self, frame: str) -> None:
        if not self.writable():
            if not self.dead and self.ws is not None:  # closing, and the reader has not seen it yet
                self._dispatch(self.protocol.connection_lost(_close_reason(None, self.ws)))
            raise TTSConnectionError("nineninesix: the connection is closed")
        assert self.ws is not None
        self.last_used = time.monotonic()
        try:
            async with self._send_lock:
                await self.ws.send(frame)
        except ConnectionClosed as exc:
            self._dispatch(self.protocol.connection_lost(_close_reason(exc)))
            raise TTSConnectionError(
                f"nineninesix: connection lost while sending ({_close_reason(exc)})"
            ) from None

    def add(self, ctx: NineninesixContext) -> None:
        self.protocol.open_context(ctx.id)
        self.contexts[ctx.id] = ctx

    def forget(self, context_id: str) -> None:
        self.contexts.pop(context_id, None)
        self.protocol.forget(context_id)

    async def _read_loop(self) -> None:
        """Read until the socket is closed, whatever the frames. Once the connection failed (a socket-closing
        error, a malformed frame) the close is started and the rest is read and discarded, so the server's
        close reply, queued behind frames it was still sending, is seen and the close completes at once."""
        ws = self.ws
        assert ws is not None
        try:
            async for message in ws:
                if self.protocol.closed:
                    continue  # closing: discard until the close handshake completes
                self._dispatch(self._receive(message))
                await self._flush_outbox()
                if self.protocol.closed:
                    self._start_close()
        except ConnectionClosed as exc:
            reason = _close_reason(exc)
        except Exception as exc:  # a bug must not leave turns hanging
            logger.exception("nineninesix: reader failed")
            reason = f"reader failed: {type(exc).__name__}"
        else:
            reason = _close_reason(None, ws)
        self._dispatch(self.protocol.connection_lost(reason))
        await self._start_close()  # done, or bounded by close_timeout (then websockets aborts the transport)

    def _receive(self, message: str | bytes) -> list[Event]:
        try:
            return self.protocol.receive(message)
        except Exception as exc:  # a bug must not leave turns hanging, nor the socket open
            logger.exception("nineninesix: reader failed")
            return self.protocol.fail_connection(
                NineninesixProtocolError(f"nineninesix: reader failed: {type(exc).__name__}")
            )

    async def _flush_outbox(self) -> None:
        while self.protocol.outbox:
            frame = self.protocol.outbox.pop(0)
            with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
                await asyncio.wait_for(self.send(frame), self.client.cancel_timeout)

    def _start_close(self) -> asyncio.Task[None]:
        """The one task closing the socket (started once, by the reader or by :meth:`close`)."""
        if self._closer is None:
            self._closer = asyncio.get_running_loop().create_task(
                self._close_ws(), name=f"nineninesix-close-{self.serial}"
            )
        return self._closer

    async def _close_ws(self) -> None:
        assert self.ws is not None
        with contextlib.suppress(Exception):
            # bounded by close_timeout: websockets aborts the transport when the handshake does not complete
            await self.ws.close()

    def _dispatch(self, events: list[Event]) -> None:
        for ev in events:
            if isinstance(ev, ConnectionFailed):
                if self.contexts or not isinstance(ev.error, TTSConnectionError):
                    logger.warning("nineninesix: connection #%d failed: %s", self.serial, ev.error)
                else:
                    logger.debug("nineninesix: idle connection #%d closed: %s", self.serial, ev.error)
                self.client._discard(self)
                continue
            ctx = self.contexts.get(ev.context_id)
            if ctx is not None:
                ctx._on_event(ev)
            elif isinstance(ev, (ContextDone, ContextFailed)):
                # the end of a context its owner already let go (e.g. a late cancel acknowledgement)
                self.protocol.forget(ev.context_id)

    async def close(self) -> None:
        if not self.dead:
            self._dispatch(self.protocol.connection_lost("closed by the client"))
        if self.ws is not None:
            # The reader keeps draining while the close completes; both end within close_timeout.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._start_close()), CLOSE_TIMEOUT + 1.0)
        if self._reader is not None:
            with contextlib.suppress(Exception):  # asyncio.TimeoutError included
                await asyncio.wait_for(self._reader, 1.0)  # cancelled if it has not ended by then


def _close_reason(exc: ConnectionClosed | None, ws: ClientConnection | None = None) -> str:
    rcvd = exc.rcvd if exc is not None else (ws.protocol.close_rcvd if ws is not None else None)
    if rcvd is None:
        return "connection dropped (no close frame)"
    return f"connection closed by the server (code {rcvd.code}{': ' + rcvd.reason if rcvd.reason else ''})"


def _handshake_error(exc: InvalidStatus, api_key: str) -> TTSBridgeError:
    status = exc.response.status_code
    body = exc.response.body or b""
    code, message = "http_error", f"handshake rejected with HTTP {status}"
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            code = str(data.get("error") or data.get("error_code") or code)
            message = str(data.get("message") or message)
    except ValueError:
        pass
    if status == 401:
        code = "unauthorized" if code == "http_error" else code
    retryable = status >= 500 or status in (408, 429)
    return TTSAPIError(
        redact(message, (api_key,)),
        provider=PROVIDER,
        error_code=code,
        status_code=status,
        retryable=retryable,
        closes_connection=True,
    )


class NineninesixClient:
    """Framework-free Nineninesix WebSocket client.

    >>> client = NineninesixClient(api_key="sk_996_...")           # or $NINENINESIX_API_KEY
    >>> ctx = await client.open_context(OutputFormat(sample_rate=16000), voice="...")
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
        ping_interval: WebSocket keepalive pings (also detect a dead network); None disables.
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
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        self.base_url = base_url
        self.http_base, ws_base = derive_urls(base_url)
        self.cancel_ack = cancel_ack
        for name, val in (
            ("connect_timeout", connect_timeout),
            ("cancel_timeout", cancel_timeout),
            ("receive_timeout", receive_timeout),
            ("max_idle", max_idle),
        ):
            if not val > 0:
                raise TTSInvalidOptionError(name, val, "a number of seconds > 0")
        self.connect_timeout = connect_timeout
        self.cancel_timeout = cancel_timeout
        self.receive_timeout = receive_timeout
        self.max_idle = max_idle
        self.ping_interval = ping_interval
        query = {"api_key": self._api_key}
        if cancel_ack:
            query["cancel_ack"] = "true"
        self._ws_url = f"{ws_base}/tts/websocket?{urlencode(query)}"
        self._pool: dict[OutputFormat, _Connection] = {}
        self._locks: dict[OutputFormat, asyncio.Lock] = {}
        self._serial = 0
        self._epoch = 0  # bumped by aclose(): a connect that was under way then is closed, not pooled
        self.connections_opened = 0

    def __repr__(self) -> str:
        return f"NineninesixClient(base_url={self.base_url!r}, api_key={mask_key(self._api_key)})"

    @property
    def ws_url(self) -> str:
        """The connection URL. It holds the key: never log it (use ``redact``)."""
        return self._ws_url

    async def open_context(
        self,
        output_format: OutputFormat | None = None,
        *,
        model: str | None = None,
        voice: str | None = None,
        language: str | None = None,
        context_id: str | None = None,
    ) -> NineninesixContext:
        """A new context on the pooled connection for ``output_format`` (connecting if needed)."""
        fmt = output_format or OutputFormat()
        if fmt.container != "raw":
            raise TTSInvalidOptionError(
                "output_format.container", fmt.container, "raw (WebSocket streams raw only)"
            )
        opened_before = self.connections_opened
        conn = await self._connection(fmt)
        ctx = NineninesixContext(
            conn, context_id or str(uuid.uuid4()), model=model, voice=voice, language=language
        )
        # No handshake was paid for this context (pooled or prewarmed socket); reported in LiveKit's metrics.
        ctx.connection_reused = self.connections_opened == opened_before
        conn.add(ctx)
        return ctx

    async def prewarm(self, output_format: OutputFormat | None = None) -> None:
        """Open (or refresh) the connection for ``output_format`` ahead of the first turn."""
        await self._connection(output_format or OutputFormat())

    def connection_for(self, output_format: OutputFormat) -> _Connection | None:
        return self._pool.get(output_format)

    async def _connection(self, fmt: OutputFormat) -> _Connection:
        epoch = self._epoch
        lock = self._locks.setdefault(fmt, asyncio.Lock())
        async with lock:
            if self._epoch != epoch:
                raise TTSConnectionError("nineninesix: the client was closed")
            conn = self._pool.get(fmt)
            if conn is not None and not conn.dead and conn.idle_for() > self.max_idle and not conn.contexts:
                logger.debug(
                    "nineninesix: replacing connection #%d idle for %.0fs", conn.serial, conn.idle_for()
                )
                await conn.close()
                conn = None
            if conn is None or not conn.writable():
                self._serial += 1
                conn = _Connection(self, fmt, self._serial)
                await conn.connect()
                if self._epoch != epoch:  # aclose() ran while we were connecting: keep nothing open
                    await conn.close()
                    raise TTSConnectionError("nineninesix: the client was closed")
                self.connections_opened += 1
                self._pool[fmt] = conn
            return conn

    def _discard(self, conn: _Connection) -> None:
        if self._pool.get(conn.output_format) is conn:
            del self._pool[conn.output_format]

    async def aclose(self) -> None:
        """Close every connection; open contexts fail with :class:`TTSConnectionError`. The client stays
        usable: a later ``open_context`` connects again."""
        self._epoch += 1
        conns = list(self._pool.values())
        self._pool.clear()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

    async def __aenter__(self) -> NineninesixClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


__all__ = ["NineninesixClient", "NineninesixContext", "derive_urls", "resolve_api_key"]
