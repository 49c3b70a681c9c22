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

import asyncio
import contextlib
import dataclasses
import logging
import math
import sys
import weakref
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import aiohttp

from ttsbridge._keys import account_scope
from ttsbridge.audio.resample import StreamResampler
from ttsbridge.engine.backoff import Backoff
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError
from ttsbridge.nineninesix.billing import NINENINESIX
from ttsbridge.nineninesix.client import NineninesixClient, NineninesixContext
from ttsbridge.nineninesix.facts import ContextFacts, begin_retry, may_retry, replay_deadline
from ttsbridge.nineninesix.http import NineninesixHTTP
from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, NineninesixOptions, OutputFormat
from ttsbridge.policy.usage import TurnUsage, UsageMeter
from ttsbridge.turns import Synthesis, Turn, TurnOutcome, TurnProvider

if TYPE_CHECKING:
    from ttsbridge.cache import PhraseCache

logger = logging.getLogger("ttsbridge.nineninesix")


def _wire_format(fmt: OutputFormat) -> str:
    return f"{fmt.encoding}@{fmt.sample_rate}"


class NineninesixTurn(Turn):
    """One turn over one context (a fresh one per retry). Its facts are the current context's
    (:class:`~.facts.ContextFacts`, written by the protocol); the turn itself only knows what spans its
    contexts: the caller cancelled it, its iteration is over, the provider is closing."""

    def __init__(
        self,
        provider: NineninesixTurnProvider,
        options: NineninesixOptions,
        output_format: OutputFormat,
        sample_rate: int,
    ) -> None:
        self._provider = provider
        self._options = options
        self._format = output_format
        self.sample_rate = sample_rate
        self._resampler = StreamResampler(output_format.sample_rate, sample_rate)
        self._ctx: NineninesixContext | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()  # cuts a retry backoff short (cancel, provider closed)
        self._closed_error: TTSBridgeError | None = None
        self._cancelled = False  # the caller cancelled the turn (whichever context it is on)
        self._done = False  # the iteration is over (or the turn was cancelled)
        self._retry_error: TTSBridgeError | None = None  # a retry that could not be made (no context has it)

    def __repr__(self) -> str:
        return f"NineninesixTurn(id={self.id!r}, rate={self.sample_rate}, done={self._done})"

    async def _open(self, **kw: Any) -> None:
        o = self._options
        self._ctx = await self._provider.client.open_context(
            self._format, model=o.model, voice=o.voice, language=o.language, **kw
        )

    @property
    def id(self) -> str:
        return self._ctx.id if self._ctx else ""

    @property
    def context(self) -> NineninesixContext | None:
        return self._ctx

    @property
    def _facts(self) -> ContextFacts:
        assert self._ctx is not None
        return self._ctx.facts

    @property
    def retries(self) -> int:
        return self._facts.retries if self._ctx else 0

    @property
    def audio_started(self) -> bool:
        return bool(self._ctx and self._facts.audio_bytes)

    @property
    def done(self) -> bool:
        return self._done

    @property
    def connection_reused(self) -> bool:
        return self._ctx.connection_reused if self._ctx is not None else False

    @property
    def characters_sent(self) -> int:
        return self._facts.chars if self._ctx else 0

    @property
    def outcome(self) -> TurnOutcome | None:
        if self.error is not None:
            return "failed"
        if self._cancelled:
            return "cancelled"
        return "done" if self._done else None

    @property
    def error(self) -> TTSBridgeError | None:
        """What the iteration raised: the current context's error (the protocol's record), or the error of a
        retry that could not be made. None while the turn runs, and for a completed or cancelled turn."""
        if not self._done or self._cancelled or self._ctx is None:
            return None
        return self._retry_error or self._facts.error

    @property
    def wire_format(self) -> str:
        return _wire_format(self._format)

    @property
    def usage(self) -> TurnUsage:
        """Nineninesix's rule (:data:`~ttsbridge.nineninesix.billing.NINENINESIX`) over the current context's facts:
        every transcript of the turn is billed, also when cancelled; refunded when the server ends the turn
        with an error. An earlier context was retried only when the server billed nothing of it."""
        meter = UsageMeter(NINENINESIX, turn_id=self.id)
        if self._ctx is not None:
            facts = self._facts
            for text in facts.texts:
                meter.send(text)
            meter.audio(facts.audio_bytes / (2 * self._format.sample_rate))
        meter.settle(self.outcome, self.error_code, by_server=isinstance(self.error, TTSAPIError))
        meter.heard(self.characters_heard)
        return dataclasses.replace(meter.usage, retries=self.retries)

    async def send(self, text: str) -> None:
        if self._done or self._cancelled:
            raise TTSBridgeError(f"turn {self.id} is over; no more text can be sent")
        if self._facts.ended:
            raise TTSBridgeError(f"turn {self.id} was ended; no more text can be sent")
        if not text.strip():
            return  # the server trims transcripts: an empty one is only useful as an end marker
        async with self._lock:
            if self._cancelled:
                return  # cancelled while this send waited for the lock: the text is not wanted any more
            await self._forward(lambda ctx: ctx.send(text))

    async def end(self) -> None:
        if self._facts.ended or self._done or self._cancelled:
            return
        async with self._lock:
            if self._cancelled:
                return
            await self._forward(lambda ctx: ctx.end())

    async def _forward(self, op: Any) -> None:
        """Run ``op`` on the context; an error after which the turn will be retried is not the caller's (the
        protocol kept the text: the retry replays it)."""
        ctx = self._ctx
        assert ctx is not None
        try:
            await op(ctx)
        except TTSBridgeError as exc:
            if self._retry_possible(exc, ctx):
                return
            raise

    def _retry_possible(self, err: BaseException, ctx: NineninesixContext) -> bool:
        """The protocol's verdict (:func:`~.facts.may_retry`), unless the turn was cancelled or the provider
        is closing."""
        if self._cancelled or self._closed_error is not None:
            return False
        return may_retry(ctx.facts, err, self._provider.concurrent_limit_retries)

    async def cancel(self) -> None:
        """Barge-in: no audio is yielded after this returns. The cancel is on the wire when it returns; whether
        it also waits for the server's acknowledgement is the provider's ``wait_for_cancel_ack``."""
        await self._cancel(wait=self._provider.wait_for_cancel_ack)

    async def _cancel(self, *, wait: bool) -> None:
        if self._cancelled or self._done:
            return  # a finished turn stays "done" (or "failed"): cancelling it changes nothing
        self._cancelled = True
        self._done = True
        self._wake.set()
        self._resampler.reset()
        if self._ctx is not None:
            await self._ctx.cancel(wait=wait)

    def _abort(self, err: TTSBridgeError) -> None:
        """The provider is closing: a turn waiting to retry fails with ``err`` at once."""
        if self._closed_error is None:
            self._closed_error = err
        self._wake.set()

    def take_ready(self, max_bytes: int) -> bytes:
        """The audio (at :attr:`sample_rate`, resampled like the iterator's) of the whole chunks already
        received and not yet yielded, at most ``max_bytes``, in order; ``b""`` when none, once cancelled, and
        after the iteration ended. Never waits, never raises, never consumes the turn's end or error. The
        adapters call it after each chunk they read to push what is queued behind it as one frame. The chunks
        count as delivered (the protocol counted them on receipt: the turn is not retried after them)."""
        ctx = self._ctx
        if ctx is None or self._cancelled or self._done:
            return b""
        resampler = self._resampler
        pcm = ctx.take_ready(resampler.max_input(max_bytes))  # a budget the resampled output cannot pass
        return resampler.process(pcm) if pcm else b""

    def take_received(self) -> bytes:
        if self._ctx is None or self._cancelled or self._done:
            return b""
        return self.take_ready(sys.maxsize) + self._resampler.flush()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        try:
            while True:
                ctx = self._ctx
                assert ctx is not None
                try:
                    async with contextlib.aclosing(
                        cast("AsyncGenerator[bytes, None]", ctx.__aiter__())
                    ) as chunks:
                        async for pcm in chunks:
                            if self._cancelled:
                                return
                            out = self._resampler.process(pcm)
                            if out:
                                yield out
                    if self._cancelled:
                        return
                    tail = self._resampler.flush()
                    self._done = True
                    if tail:
                        yield tail
                    return
                except TTSBridgeError as exc:
                    if self._cancelled:
                        return  # the caller cancelled the turn: whatever failed, it wants no more of it
                    if not self._retry_possible(exc, ctx):
                        self._done = True
                        tail = self._resampler.flush()  # the audio received before the failure, all of it
                        if tail:
                            yield tail
                        raise
                    failure = exc
                try:
                    await self._retry(failure)
                except TTSBridgeError as exc:
                    if self._cancelled:  # e.g. a replayed send refused because cancel() just ran
                        return
                    self._done = True
                    self._retry_error = exc
                    raise
                if self._cancelled:
                    return
        finally:
            if not self._done and not self._cancelled:
                # The consumer left early (break, or its task was cancelled): nobody will read this turn.
                await self._cancel(wait=False)

    async def _retry(self, exc: TTSBridgeError) -> None:
        """The one place a turn is retried: the protocol counts the attempt and picks the fresh context_id,
        the engine's backoff the delay; the protocol's record of the turn's text is replayed."""
        failed = self._facts
        replays = failed.replays
        attempt, fresh_id = begin_retry(failed, exc)
        replay = failed.replays > replays  # the connection died under it: a fresh one, no backoff needed
        delay = 0.0 if replay else self._provider.backoff.delay(attempt)
        logger.info(
            "nineninesix: %s on context %s; retrying the turn on a fresh context in %.2fs (%d/%d)",
            getattr(exc, "error_code", exc),
            self.id,
            delay,
            attempt,
            self._provider.concurrent_limit_retries,
        )
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)  # cut short by cancel() or aclose()
        async with self._lock:
            if self._cancelled:
                return
            if self._closed_error is not None:
                raise self._closed_error
            self._resampler.reset()
            receive_timeout = self._provider.client.receive_timeout
            await self._open(
                context_id=fresh_id,
                retries=attempt,
                replays=failed.replays,
                not_after=replay_deadline(failed, receive_timeout) if replay else failed.not_after,
            )
            assert self._ctx is not None
            if self._cancelled:  # cancelled while the fresh context was being opened: it is not wanted
                await self._ctx.cancel()
                return
            for text in list(failed.texts):
                await self._ctx.send(text)
            if failed.ended:
                await self._ctx.end()


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
        phrase_cache: a :class:`ttsbridge.cache.PhraseCache`: ``synthesize()`` (and the adapters' whole known
            texts) are served from it, a miss stored once it completed (docs/cache.md).
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
        phrase_cache: PhraseCache | None = None,
        **client_kwargs: Any,
    ) -> None:
        self._options = options or NineninesixOptions()
        self.client = NineninesixClient(api_key, base_url=base_url, **client_kwargs)
        self.http = NineninesixHTTP(api_key, base_url=base_url, session=http_session)
        self.concurrent_limit_retries = concurrent_limit_retries
        self.retry_backoff = retry_backoff
        self.wait_for_cancel_ack = wait_for_cancel_ack
        self._turns: weakref.WeakSet[NineninesixTurn] = weakref.WeakSet()
        self._account = account_scope(self.client._api_key)
        self.use_phrase_cache(phrase_cache)

    @property
    def backoff(self) -> Backoff:
        """Between retries: ``retry_backoff * 2**(n-1)``, jittered to 0.5x-1.5x."""
        return Backoff(base=1.5 * self.retry_backoff, floor=1 / 3, cap=math.inf)

    @property
    def options(self) -> NineninesixOptions:
        return self._options

    def __repr__(self) -> str:
        return f"NineninesixTurnProvider({self.client!r}, options={self.options!r})"

    def _resolve(self, overrides: dict[str, Any]) -> NineninesixOptions:
        return self.options.updated(**overrides) if overrides else self.options  # type: ignore[return-value]

    async def open_turn(self, *, sample_rate: int, **overrides: Any) -> NineninesixTurn:
        opts = self._resolve(overrides)
        fmt = opts.output_format(sample_rate)
        turn = NineninesixTurn(self, opts, fmt, sample_rate)
        await turn._open()
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
            "endpoint": self.client.http_base,
            "account": self._account,
            "model": opts.model,
            "voice": opts.voice,
            "language": opts.language,
            "wire_format": _wire_format(opts.output_format(sample_rate)),
            "sample_rate": sample_rate,
        }

    async def prewarm(self, sample_rate: int | None = None) -> None:
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
        err = TTSConnectionError("nineninesix: the provider was closed")
        for turn in list(self._turns):
            if not turn.done:
                turn._abort(err)  # a turn waiting to retry must not reconnect after this
        await self.client.aclose()
        await self.http.aclose()
