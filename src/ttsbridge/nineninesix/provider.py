"""Nineninesix as a :class:`~ttsbridge.turns.TurnProvider`: its options, its typed request, which dialer (the
engine's :class:`~ttsbridge.engine.dialers.SharedDialer`, one pooled connection per output format, which the API
fixes per connection, shared on each event loop by every provider with the same endpoint, key and settings:
:mod:`ttsbridge.engine.shared`) and its cache identity; turns, connections and retries (planned by the protocol)
are the engine's (docs/nineninesix.md, docs/production.md). The API key travels in the URL (``?api_key=``) as the
API requires; it never reaches a log line, an exception text or a repr."""

from __future__ import annotations

import math
import uuid
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from ttsbridge._keys import account_scope
from ttsbridge._redact import mask_key
from ttsbridge.audio.resample import StreamResampler
from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.dialers import SharedDialer
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.shared import LoopShare
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSBridgeError, TTSConnectionError, TTSInvalidOptionError
from ttsbridge.nineninesix.catalog import SETTINGS, derive_urls, resolve_api_key
from ttsbridge.nineninesix.facts import NineninesixRequest
from ttsbridge.nineninesix.http import NineninesixHTTP
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, NineninesixOptions, OutputFormat
from ttsbridge.nineninesix.protocol import NineninesixProtocol
from ttsbridge.turns import Synthesis, TurnProvider


def _wire_format(fmt: OutputFormat) -> str:
    return f"{fmt.encoding}@{fmt.sample_rate}"


@dataclass(frozen=True)
class Endpoint:
    """What a connection's protocol is made with; with the :class:`ConnectionSettings`, what providers must all
    match to share a pool (the key is compared, never shown)."""

    api_key: str = field(repr=False)
    base_url: str
    cancel_ack: bool
    receive_timeout: float
    cancel_timeout: float

    def protocol(self, fmt: OutputFormat) -> NineninesixProtocol:
        """The protocol of a new connection for ``fmt`` (the dialer's factory)."""
        return NineninesixProtocol(
            fmt,
            cancel_ack=self.cancel_ack,
            base_url=self.base_url,
            api_key=self.api_key,
            receive_timeout=self.receive_timeout,
            ack_wait=min(0.5, self.cancel_timeout),
            cancel_timeout=self.cancel_timeout,
        )

    def dialer(self, settings: ConnectionSettings) -> SharedDialer[OutputFormat]:
        return SharedDialer(self.protocol, settings, key=_output_format, name="nineninesix")


def _output_format(request: NineninesixRequest) -> OutputFormat:
    return request.output_format


class NineninesixTurnProvider(TurnProvider[NineninesixOptions]):
    """Turns over pooled Nineninesix WebSocket connections; one-shot synthesis over ``POST /tts/sse`` (over one
    WebSocket turn when no voice is set: the HTTP endpoints require one).

    Args:
        api_key: the key, or None to read ``$NINENINESIX_API_KEY``.
        base_url: one URL for HTTP and WebSocket (``https://api.nineninesix.ai``; the emulator's for tests).
        options: model, voice, language, wire encoding and wire sample rate (validated).
        http_session: an aiohttp session to reuse for HTTP calls.
        concurrent_limit_retries: how often a turn is retried on a fresh context after ``concurrent_limit``.
        retry_backoff: between those retries, ``retry_backoff * 2**(n-1)`` jittered to 0.5x-1.5x.
        wait_for_cancel_ack: make ``Turn.cancel()`` wait (bounded) for the server's ``done cancelled:true``.
            Off by default: after a barge-in the next turn should not pay a round trip; the acknowledgement is
            still requested and consumed by the connection (and late frames of the context are dropped).
        cancel_ack: open connections with ``?cancel_ack=true`` (the server confirms each cancel).
        cancel_timeout: bound on writing a cancel and on waiting for its acknowledgement.
        receive_timeout: a turn fails with ``TTSTimeoutError`` when the server owes it audio (text sent or
            turn ended) and sends nothing for this long (a turn's own ``timeout`` replaces it).
        settings: the connection knobs (default: :data:`~ttsbridge.nineninesix.catalog.SETTINGS`);
        **knobs: any of them by name (``connect_timeout``, ``ping_interval``, ``max_idle``, ``proxy``,
            ``ssl``...: see :class:`~ttsbridge.engine.settings.ConnectionSettings` and docs/nineninesix.md).
            ``proxy`` and ``ssl`` apply to the HTTP calls too.

    Providers with the same endpoint, key and knobs share this event loop's pool (docs/production.md): closing
    one closes only what no other uses. Built where no loop runs yet, it leases nothing until it is used in one.
    """

    provider = "nineninesix"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str = DEFAULT_BASE_URL,
        options: NineninesixOptions | None = None,
        http_session: aiohttp.ClientSession | None = None,
        concurrent_limit_retries: int = 3,
        retry_backoff: float = 0.2,
        wait_for_cancel_ack: bool = False,
        cancel_ack: bool = True,
        cancel_timeout: float = 2.0,
        receive_timeout: float = 15.0,
        settings: ConnectionSettings | None = None,
        **knobs: Any,
    ) -> None:
        for name, value in (("cancel_timeout", cancel_timeout), ("receive_timeout", receive_timeout)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise TTSInvalidOptionError(name, value, "a number of seconds > 0")
        self._options = options or NineninesixOptions()
        self._api_key = key = resolve_api_key(api_key)
        self.base_url = base_url
        self.http_base, _ = derive_urls(base_url)
        self.cancel_ack, self.cancel_timeout, self.receive_timeout = (
            cancel_ack,
            cancel_timeout,
            receive_timeout,
        )
        self.concurrent_limit_retries = concurrent_limit_retries
        self.retry_backoff = retry_backoff
        self.wait_for_cancel_ack = wait_for_cancel_ack
        self.settings = conn = (settings or SETTINGS).replace(**knobs)
        # The dialer is made per event loop, shared by every provider with the same endpoint and settings there.
        self.endpoint = endpoint = Endpoint(key, base_url, cancel_ack, receive_timeout, cancel_timeout)
        self._dialers: LoopShare[SharedDialer[OutputFormat]] = LoopShare(
            (endpoint, conn), lambda: endpoint.dialer(conn), SharedDialer.aclose, name="nineninesix"
        )
        self.http = NineninesixHTTP(
            key, base_url=base_url, session=http_session, proxy=conn.proxy, ssl=conn.ssl
        )
        self._turns: weakref.WeakSet[EngineTurn] = weakref.WeakSet()
        self._account = account_scope(key)

    @property
    def dialer(self) -> SharedDialer[OutputFormat]:
        """This event loop's dialer (its pool of connections by output format), shared by every provider with the same endpoint and
        settings on this loop. Once the provider is closed: the one it last used on this loop, for diagnostics
        (its counters and connections; turns go through :meth:`open_turn`, which refuses)."""
        return self._dialers.current()

    @property
    def closed(self) -> bool:
        return self._dialers.closed

    @property
    def backoff(self) -> Backoff:
        """Between retries: ``retry_backoff * 2**(n-1)``, jittered to 0.5x-1.5x."""
        return Backoff(base=1.5 * self.retry_backoff, floor=1 / 3, cap=math.inf)

    @property
    def options(self) -> NineninesixOptions:
        return self._options

    def __repr__(self) -> str:
        return (
            f"NineninesixTurnProvider(base_url={self.base_url!r}, api_key={mask_key(self._api_key)}, "
            f"options={self.options!r})"
        )

    def _resolve(self, overrides: dict[str, Any]) -> NineninesixOptions:
        return self.options.updated(**overrides) if overrides else self.options  # type: ignore[return-value]

    def update_options(self, **options: Any) -> None:
        self._options = self._resolve(options)

    async def open_turn(
        self, *, sample_rate: int, timeout: float | None = None, **overrides: Any
    ) -> EngineTurn:
        """One context on the pooled connection for the turn's format (a fresh one per retry: the protocol
        plans them)."""
        opts = self._resolve(overrides)
        request = NineninesixRequest(
            opts.output_format(sample_rate), opts.model, opts.voice, opts.language,
            self.concurrent_limit_retries, self.backoff, timeout,
        )  # fmt: skip
        turn = EngineTurn(
            self._dialers.get(), request, turn_id=str(uuid.uuid4()), sample_rate=sample_rate, timeout=timeout,
            cancel_timeout=self.cancel_timeout, wait_for_cancel_ack=self.wait_for_cancel_ack,
        )  # fmt: skip
        await turn.open()
        self._turns.add(turn)
        return turn

    def describe(self, *, sample_rate: int, **overrides: Any) -> dict[str, str]:
        opts = self._resolve(overrides)
        out = {"model": opts.model or "", "voice": opts.voice or ""}
        out["wire_format"] = _wire_format(opts.output_format(sample_rate))
        return {k: v for k, v in out.items() if v}

    def cache_identity(self, *, sample_rate: int, **overrides: Any) -> dict[str, Any]:
        opts = self._resolve(overrides)
        return {
            "provider": self.provider,
            "endpoint": self.http_base,
            "account": self._account,
            "model": opts.model,
            "voice": opts.voice,
            "language": opts.language,
            "wire_format": _wire_format(opts.output_format(sample_rate)),
            "sample_rate": sample_rate,
        }

    async def prewarm(self, sample_rate: int | None = None) -> None:
        """Open the shared connection for the format the next turn will use (one, however many providers and
        calls ask). Does nothing once the provider is closed."""
        if self.closed:
            return
        opts = self.options
        fmt = (
            opts.output_format(sample_rate)
            if sample_rate
            else OutputFormat(encoding=opts.encoding, sample_rate=opts.sample_rate or 22050)
        )
        await self._dialers.get().prewarm(fmt)

    def synthesize(self, text: str, *, sample_rate: int, **overrides: Any) -> Synthesis:
        """One-shot synthesis, resampled to ``sample_rate``, yielded as the audio arrives.

        With a voice: ``POST /tts/sse``. Without one (``voice=None``, "the server's default voice"): one turn
        on the WebSocket, the only transport that has a default voice (``/tts/bytes`` and ``/tts/sse``
        require ``voice``, and no endpoint says which voice the default is, so it can't be looked up).
        """
        return Synthesis(lambda synthesis: self._synthesize(synthesis, text, sample_rate, overrides))

    async def _synthesize(
        self, synthesis: Synthesis, text: str, sample_rate: int, overrides: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        opts = self._resolve(overrides)
        if not opts.voice:
            async for pcm in self._synthesize_on_a_turn(synthesis, text, sample_rate, overrides):
                yield pcm
            return
        fmt = opts.output_format(sample_rate)
        resampler = StreamResampler(fmt.sample_rate, sample_rate)
        synthesis.hold(resampler.flush)  # given up mid-body (the caller's timeout): the filter's tail
        error: TTSBridgeError | None = None
        try:
            async for pcm in self.http.tts_sse(
                text, fmt, model=opts.model, voice=opts.voice, language=opts.language
            ):
                out = resampler.process(pcm)
                if out:
                    yield out
        except TTSBridgeError as exc:  # cut short: the audio received before the failure still goes out
            error = exc
        synthesis.hold(None)
        tail = resampler.flush()
        if tail:
            yield tail
        if error is not None:
            raise error

    async def aclose(self) -> None:
        """Fail this provider's open turns, let go of the shared pool (closed, 1000, once no other provider on
        this loop uses it) and of the HTTP session. Idempotent; nothing reopens afterwards: ``prewarm()`` does
        nothing and ``open_turn()`` raises :class:`TTSConnectionError`."""
        err = TTSConnectionError("nineninesix: the provider was closed", retryable=False)
        for turn in list(self._turns):
            if not turn.done:
                turn.abort(err)  # a turn waiting to retry must not reconnect after this
        await self._dialers.aclose()  # the last provider on this loop: the pool closes, its turns fail
        for turn in list(self._turns):
            protocol = turn.protocol
            if not turn.done and protocol is not None and not protocol.closed:
                await turn.cancel()  # the pool is shared on: only this provider's contexts go (bounded)
        await self.http.aclose()
