"""Nineninesix as a :class:`~ttsbridge.turns.TurnProvider`: what the framework adapters use.

One turn = one server context on a pooled connection. The turn decodes G.711, resamples from the wire rate
to the caller's rate (asking the server for that rate when the API has it), flushes the resampler tail at
``done``, and retries ``concurrent_limit`` on a fresh ``context_id`` (replaying the turn's text) as long as no
audio was delivered; so is a turn whose connection was lost before any of its requests was written (the
server never heard of it), and, once, a turn whose connection died under it (closed, dropped, or silent: a ping
went unanswered) before any of its audio arrived, on a fresh connection with a new context_id and the first
attempt's deadline. After ``cancel()`` the iterator stops (no error); a consumer that leaves the
iterator early cancels the turn.
"""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from ttsbridge._keys import account_scope
from ttsbridge._redact import mask_key
from ttsbridge.audio.resample import StreamResampler
from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.shared import LoopShare, settings_key
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSBridgeError, TTSConnectionError
from ttsbridge.nineninesix.catalog import resolve_api_key
from ttsbridge.nineninesix.client import NineninesixClient
from ttsbridge.nineninesix.http import NineninesixHTTP
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, NineninesixOptions, OutputFormat
from ttsbridge.turns import Synthesis, TurnProvider

logger = logging.getLogger("ttsbridge.nineninesix")


def _wire_format(fmt: OutputFormat) -> str:
    return f"{fmt.encoding}@{fmt.sample_rate}"


class NineninesixTurnProvider(TurnProvider[NineninesixOptions]):
    """Turns over pooled Nineninesix WebSocket connections; one-shot synthesis over ``POST /tts/sse`` (over one
    WebSocket turn when no voice is set: the HTTP endpoints require one).

    Args:
        api_key: the key, or None to read ``$NINENINESIX_API_KEY``.
        base_url: one URL for HTTP and WebSocket (``https://api.nineninesix.ai``; the emulator's for tests).
        options: model, voice, language, wire encoding and wire sample rate (validated).
        http_session: an aiohttp session to reuse for HTTP calls.
        concurrent_limit_retries: how often a turn is retried on a fresh context after ``concurrent_limit``.
        wait_for_cancel_ack: make ``Turn.cancel()`` wait (bounded) for the server's ``done cancelled:true``.
            Off by default: after a barge-in the next turn should not pay a round trip; the acknowledgement is
            still requested and consumed by the connection (and late frames of the context are dropped).
        client_kwargs: passed to :class:`NineninesixClient` (timeouts, ``cancel_ack``, ``max_idle``...).
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
        **client_kwargs: Any,
    ) -> None:
        self._options = options or NineninesixOptions()
        key = resolve_api_key(api_key)
        # Validated now (a bad knob fails here, before any loop runs); the client itself is made per event
        # loop and shared by every provider with the same settings there (engine/shared.py).
        spare = NineninesixClient(key, base_url=base_url, **client_kwargs)
        self.base_url = base_url
        self.http_base = spare.http_base
        self._api_key = key
        self._clients: LoopShare[NineninesixClient] = LoopShare(
            settings_key("nineninesix", key, base_url, client_kwargs),
            lambda: NineninesixClient(key, base_url=base_url, **client_kwargs),
            NineninesixClient.aclose,
            name="nineninesix",
        )
        self.http = NineninesixHTTP(
            key,
            base_url=base_url,
            session=http_session,
            proxy=client_kwargs.get("proxy", True),
            ssl=client_kwargs.get("ssl"),
        )
        self.concurrent_limit_retries = concurrent_limit_retries
        self.retry_backoff = retry_backoff
        self.wait_for_cancel_ack = wait_for_cancel_ack
        self._turns: weakref.WeakSet[EngineTurn] = weakref.WeakSet()
        self._account = account_scope(key)

    @property
    def client(self) -> NineninesixClient:
        """This event loop's client (its pool of connections by output format), shared by every provider
        with the same settings on this loop. Raises :class:`TTSConnectionError` once the provider is closed."""
        return self._clients.get()

    @property
    def closed(self) -> bool:
        return self._clients.closed

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

    async def open_turn(self, *, sample_rate: int, timeout: float | None = None, **overrides: Any) -> EngineTurn:
        """One context on the pooled connection (a fresh one per retry: the protocol plans them)."""
        opts = self._resolve(overrides)
        turn = await self.client.open_context(
            opts.output_format(sample_rate),
            model=opts.model,
            voice=opts.voice,
            language=opts.language,
            sample_rate=sample_rate,
            max_retries=self.concurrent_limit_retries,
            backoff=self.backoff,
            receive_timeout=timeout,
            retry=True,
            wait_for_cancel_ack=self.wait_for_cancel_ack,
        )
        self._turns.add(turn)
        return turn

    def update_options(self, **options: Any) -> None:
        self._options = self._resolve(options)

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
        fmt = (
            self.options.output_format(sample_rate)
            if sample_rate
            else OutputFormat(encoding=self.options.encoding, sample_rate=self.options.sample_rate or 22050)
        )
        await self.client.prewarm(fmt)

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
        await self._clients.aclose()  # the last provider on this loop: the pool closes, its turns fail
        for turn in list(self._turns):
            protocol = turn.protocol
            if not turn.done and protocol is not None and not protocol.closed:
                await turn.cancel()  # the pool is shared on: only this provider's contexts go (bounded)
        await self.http.aclose()
