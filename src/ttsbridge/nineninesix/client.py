"""asyncio WebSocket client for Nineninesix: pooled connections carrying many contexts.

Thin over the engine: each connection is an :class:`~ttsbridge.engine.connection.Connection` driving one
:class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`, pooled by output format in a
:class:`~ttsbridge.engine.pool.KeyedPool` (``output_format`` is fixed per connection by the API, so every context
with the same format shares one socket, reused across turns, replaced before a server idle close, and replaced at
once when it drops). No turn state here: a context reads its :class:`~.facts.ContextFacts`, written only by the
protocol, and its audio comes through a :class:`~ttsbridge.engine.stream.TurnStream`. The API key travels in
the URL (``?api_key=``) as the API requires; it never reaches a log line, an exception text or a repr.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid
from collections.abc import AsyncIterator

from ttsbridge._redact import mask_key
from ttsbridge.engine import AudioReceived, ConnectionFailed, Event, TurnFailed
from ttsbridge.engine.connection import (
    PING_AFTER_SILENCE,
    PONG_TIMEOUT,
    USER_AGENT,
    Connection,
    check_liveness_knobs,
)
from ttsbridge.engine.pool import KeyedPool
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSInvalidOptionError
from ttsbridge.nineninesix.catalog import API_KEY_ENV, derive_urls, resolve_api_key, ws_url
from ttsbridge.nineninesix.facts import ContextFacts, refuse
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, OutputFormat
from ttsbridge.nineninesix.protocol import NineninesixProtocol
from ttsbridge.nineninesix.states import ContextState

logger = logging.getLogger("ttsbridge.nineninesix")

#: Bound on a closing handshake: after it websockets aborts the TCP connection, so no socket lingers CLOSING.
CLOSE_TIMEOUT = 2.0


class NineninesixContext:
    """One server context (one turn attempt). Created by :meth:`NineninesixClient.open_context`.

    ``send`` streams text with ``continue: true``, ``end`` sends the closing ``continue: false``, ``cancel``
    stops it (waiting for the server's acknowledgement, bounded), and ``async for pcm in ctx`` yields PCM16
    at :attr:`sample_rate` (the wire rate; μ-law/A-law already decoded) until ``done``. Iteration raises the
    context's error if it failed, and :class:`TTSTimeoutError` if the server goes silent on text it owes.
    Every fact is read from :attr:`facts` (written by the protocol); the context holds only its stream.
    """

    def __init__(self, conn: NineninesixConnection, facts: ContextFacts) -> None:
        self._conn = conn
        self.facts = facts
        self.id = facts.context_id
        self.output_format = conn.output_format
        self.sample_rate = conn.output_format.sample_rate
        self._stream = TurnStream()
        #: No handshake was paid for this context (pooled or prewarmed socket); reported in LiveKit's metrics.
        self.connection_reused = False

    def __repr__(self) -> str:
        return f"NineninesixContext(id={self.id!r}, state={self.state.value})"

    @property
    def state(self) -> ContextState:
        return self.facts.state

    @property
    def done(self) -> bool:
        return self.facts.cancel_requested or self.facts.state.terminal

    @property
    def error(self) -> TTSBridgeError | None:
        return self.facts.error

    @property
    def characters_sent(self) -> int:
        return self.facts.chars

    @property
    def audio_bytes(self) -> int:
        return self.facts.audio_bytes

    async def send(self, text: str) -> None:
        """Stream ``text`` into the context (``continue: true``)."""
        if self.facts.state.terminal:
            refuse(self.facts, text, end=False)
        self._conn.protocol.send_text(self.id, text, self._conn.now())
        await self._conn.flush()

    async def end(self, text: str = "") -> None:
        """End the turn (``continue: false``); the server sends ``done`` after the queued text renders."""
        if self.facts.state.terminal:
            refuse(self.facts, text, end=True)
        self._conn.protocol.end_turn(self.id, self._conn.now(), text)
        await self._conn.flush()

    async def cancel(self, timeout: float | None = None, *, wait: bool = True) -> None:
        """Stop generation; no audio is yielded after this returns. Idempotent; never raises.

        With ``cancel_ack`` (the default) it waits, bounded by ``timeout`` (client's ``cancel_timeout``),
        for the server's ``done`` with ``cancelled: true``, so the context is really over before the next
        turn starts; ``wait=False`` sends the cancel and returns (the late acknowledgement is dropped).
        """
        if self.facts.state.terminal:
            return
        conn = self._conn
        timeout = conn.cancel_timeout if timeout is None else timeout
        conn.protocol.cancel_turn(self.id, conn.now())
        self._stream.stop()  # wake the consumer: it stops without yielding more
        try:
            # bounded too: a socket whose send buffer is full must not hold a barge-in up
            await conn.flush(timeout)
        except (TTSBridgeError, asyncio.TimeoutError):
            pass
        else:
            if wait and self.facts.state is ContextState.CANCELLING:
                await self._stream.wait_end(timeout)  # bounded by the protocol's own deadline as well
        conn.detach(self.id)  # the late acknowledgement, if any, is the connection's

    def take_ready(self, max_bytes: int) -> bytes:
        """PCM (wire rate) of the whole chunks already received and not yet yielded, at most ``max_bytes``
        (see :meth:`TurnStream.take_ready`); ``b""`` once cancelled. Never waits, never raises."""
        if self.facts.cancel_requested:
            return b""
        return self._stream.take_ready(max_bytes)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        stream, facts = self._stream, self.facts
        try:
            if self.done and not stream.pending():  # cancelled, or iterated again after its end
                if facts.error is not None and not facts.cancel_requested:
                    raise facts.error
                return
            while True:  # (a cancel puts its stop on the stream; an end comes with its event queued)
                ev = await stream.get()
                if type(ev) is AudioReceived:
                    yield ev.pcm
                elif isinstance(ev, TurnFailed):
                    raise ev.error
                else:
                    return
        finally:
            if not self.done:
                # The consumer left early (break, or its task was cancelled): nobody will read this context.
                await self.cancel(wait=False)


class NineninesixConnection(Connection):
    """One WebSocket, one output format, many contexts: the engine's connection, pooled by format."""

    def __init__(self, client: NineninesixClient, output_format: OutputFormat, serial: int) -> None:
        protocol = NineninesixProtocol(
            output_format,
            cancel_ack=client.cancel_ack,
            base_url=client.base_url,
            api_key=client._api_key,
            receive_timeout=client.receive_timeout,
            ack_wait=min(0.5, client.cancel_timeout),
            cancel_timeout=client.cancel_timeout,
        )
        super().__init__(
            protocol,
            on_event=self._on_connection_event,
            connect_timeout=client.connect_timeout,
            close_timeout=CLOSE_TIMEOUT,
            write_timeout=client.cancel_timeout,
            ping_interval=client.ping_interval,
            ping_after_silence=client.ping_after_silence,
            pong_timeout=client.pong_timeout,
            name=f"nineninesix-{serial}",
        )
        self.protocol: NineninesixProtocol = protocol
        self.client = client
        self.output_format = output_format
        self.serial = serial
        self.cancel_timeout = client.cancel_timeout

    def __repr__(self) -> str:
        fmt = self.output_format
        return f"NineninesixConnection(#{self.serial}, {fmt.encoding}@{fmt.sample_rate})"

    @property
    def contexts(self) -> dict[str, object]:
        """The contexts on this connection someone still reads (their streams, by id)."""
        return self.sinks  # type: ignore[return-value]

    def usable(self) -> bool:
        """Open, not retired, and not suspect (condemned by a timeout, or a liveness ping unanswered a while)."""
        return self.writable() and not self.suspect and not self.retired

    def expired(self) -> bool:
        """Idle for longer than ``max_idle`` with no context on it: replaced before a server idle close."""
        return not self.closed and not self.sinks and self.idle_for() > self.client.max_idle

    def _on_connection_event(self, ev: Event) -> None:
        # The ends of contexts their owner let go (a late cancel acknowledgement) need nothing: the protocol
        # dropped them already. A failed connection leaves the pool.
        if not isinstance(ev, ConnectionFailed):
            return
        if self.sinks or not isinstance(ev.error, TTSConnectionError):
            logger.warning("nineninesix: connection #%d failed: %s", self.serial, ev.error)
        else:
            logger.debug("nineninesix: idle connection #%d closed: %s", self.serial, ev.error)
        self.client._pool.discard(self.output_format, self)


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
        ping_interval: an idle pooled connection silent this long gets a keepalive ping; None disables.
        ping_after_silence: a connection the server owes audio (or a cancel's answer) that has been silent this
            long gets a WebSocket ping, and so does a turn's first request to a connection silent this long;
            None disables the check (then only ``receive_timeout`` notices a dead connection).
        pong_timeout: nothing at all (pong, audio) within this long after such a ping: the connection is dead,
            its contexts fail with :class:`~ttsbridge.errors.TTSSilentConnectionError` (a turn with no audio
            yet is replayed once on a fresh connection) and the pool opens a new one. A timeout
            (``receive_timeout``) sends the same ping: no new turn goes to that connection until it answers.
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
        retries: int = 0,
        replays: int = 0,
        not_after: float = math.inf,
    ) -> NineninesixContext:
        """A new context on the pooled connection for ``output_format`` (connecting if needed). ``retries``:
        how many earlier attempts of the same turn failed (a provider's retry on a fresh context)."""
        fmt = output_format or OutputFormat()
        if fmt.container != "raw":
            raise TTSInvalidOptionError(
                "output_format.container", fmt.container, "raw (WebSocket streams raw only)"
            )
        opened_before = self.connections_opened
        conn = await self._pool.acquire(fmt)
        facts = conn.protocol.open_turn(
            context_id or str(uuid.uuid4()),
            conn.now(),
            model=model,
            voice=voice,
            language=language,
            retries=retries,
            replays=replays,
            not_after=not_after,
        )
        ctx = NineninesixContext(conn, facts)
        ctx.connection_reused = self.connections_opened == opened_before
        conn.attach(ctx.id, ctx._stream.feed)  # the connection's dispatch feeds the stream directly
        return ctx

    async def prewarm(self, output_format: OutputFormat | None = None) -> None:
        """Open (or refresh) the connection for ``output_format`` ahead of the first turn."""
        await self._pool.acquire(output_format or OutputFormat())

    def connection_for(self, output_format: OutputFormat) -> NineninesixConnection | None:
        return self._pool.get(output_format)

    async def _connect(self, fmt: OutputFormat) -> NineninesixConnection:
        self._serial += 1
        conn = NineninesixConnection(self, fmt, self._serial)
        await conn.connect()
        return conn

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
    "NineninesixContext",
    "derive_urls",
    "resolve_api_key",
]
