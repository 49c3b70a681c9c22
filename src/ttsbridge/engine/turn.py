"""One I/O turn, written once: :class:`EngineTurn`, the :class:`~ttsbridge.turns.Turn` of every provider.

A turn is a sequence of attempts. Each attempt is one turn id on one :class:`Link` (a connection as the turn
sees it: its protocol, its dispatch, its writes) that the provider's :class:`Dialer` hands out. The turn
drives the protocol only through the typed commands of :class:`~ttsbridge.engine.protocol.TurnProtocol`
(``open_turn(turn_id, request, now)``, ``send_text``, ``end_turn``, ``cancel_turn``); an attempt that fails
says on its :class:`~.events.TurnFailed` how the turn goes on (``retry``: a :class:`~.events.RetryPlan`, a new
attempt at ``not_before`` whose typed request carries the replay, decided by the protocol). It keeps no fact of
its own beyond what spans its attempts (the caller cancelled it, its iteration is over, the provider is
closing); everything else is read off the protocol's record (:class:`~.protocol.TurnFacts`).

Audio: the connection's dispatch feeds the turn's sink, which feeds one :class:`~.stream.TurnStream` across
attempts; the iterator resamples (:class:`~ttsbridge.audio.resample.StreamResampler`) to the caller's rate
and yields the filter's tail at the end, and after a failure before raising. ``take_ready`` /
``take_received`` take what is queued without waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

from ttsbridge.audio.resample import StreamResampler
from ttsbridge.engine.events import AudioReceived, TurnDone, TurnEvent, TurnFailed
from ttsbridge.engine.link import Dialer, Link
from ttsbridge.engine.protocol import RetryPlan, TurnFacts, TurnProtocol
from ttsbridge.engine.stream import TurnStream
from ttsbridge.engine.view import TurnView
from ttsbridge.errors import TTSBridgeError

__all__ = ["Dialer", "EngineTurn", "Link"]

logger = logging.getLogger("ttsbridge.engine")


class _Retry:
    """The stream's marker between a failed attempt and the next one (never consumed by ``take_ready``)."""

    __slots__ = ()


_RETRY = _Retry()


class EngineTurn(TurnView):
    """One turn over a provider's protocol and dialer (see the module docstring).

    Args:
        dialer: the provider's (a link per attempt).
        request: the typed request of the first attempt.
        turn_id: its id (Nineninesix ``context_id``, Kitta ``request_id``).
        sample_rate: the rate the iterator yields.
        timeout: the turn's own (LiveKit's ``APIConnectOptions.timeout``): bounds the connect and the handshake
            of a connection dialled for it (None: the connection's ``connect_timeout``); the request carries
            it to the protocol as the audio-owed deadline.
        cancel_timeout: bound on writing a cancel (and on waiting for its acknowledgement).
        wait_for_cancel_ack: ``cancel()`` waits (bounded) for the server's answer when the protocol owes one.
    """

    def __init__(
        self,
        dialer: Dialer,
        request: Any,
        *,
        turn_id: str,
        sample_rate: int,
        timeout: float | None = None,
        cancel_timeout: float = 2.0,
        wait_for_cancel_ack: bool = False,
    ) -> None:
        self._dialer = dialer
        self._request = request
        self._id = turn_id
        self.sample_rate = sample_rate
        self.timeout = timeout
        self.cancel_timeout = cancel_timeout
        self.wait_for_cancel_ack = wait_for_cancel_ack
        self._link: Link | None = None
        self._facts: TurnFacts | None = None
        self._stream = TurnStream()
        self._resampler: StreamResampler | None = None
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()  # cuts a retry's wait short (cancel, provider closed)
        self._plan: RetryPlan | None = None  # a failed attempt's retry, not opened yet
        self._end: TurnEvent | None = None  # the turn's last event, as dispatched (nothing follows)
        self._error: TTSBridgeError | None = None  # what the iteration raised
        self._closed_error: TTSBridgeError | None = None
        self._cancelled = False
        self._done = False  # the iteration is over, or the turn was cancelled
        self._reused = False
        self._cancelling: asyncio.Future[None] | None = None  # while the first cancel runs
        self._callbacks: list[Callable[[EngineTurn], None]] = []
        #: Set at the turn's first audio, or once it is over (a provider starts a standby's replacement then).
        self.first_audio_or_done = asyncio.Event()

    def __repr__(self) -> str:
        return f"EngineTurn(id={self.id!r}, sample_rate={self.sample_rate}, done={self._done})"

    # --- opening ------------------------------------------------------------------------------------------

    async def open(self) -> EngineTurn:
        """Dial and open the first attempt (its first frames written, or queued until the link is up)."""
        link, self._reused = await self._dialer.dial(
            self._id, self._request, retry=False, timeout=self.timeout
        )
        await self._attach(link, self._id, self._request)
        return self

    async def _attach(self, link: Link, turn_id: str, request: Any) -> None:
        try:
            self._facts = link.protocol.open_turn(turn_id, request, link.now())
        except BaseException:
            self._dialer.hang_up(link, TurnDone(turn_id, cancelled=True))
            raise
        self._link, self._id = link, turn_id
        link.attach(turn_id, self._sink)
        await self._flush(link)

    async def _flush(self, link: Link, timeout: float | None = None) -> None:
        try:
            await link.flush(timeout)
        except TTSBridgeError:
            if self._end is None and self._plan is None:
                raise  # (lost: its end, or its retry, is on the stream: the iterator reports it)

    def add_done_callback(self, fn: Callable[[EngineTurn], None]) -> None:
        """Call ``fn(self)`` once the turn is over in the protocol (its end dispatched) or cancelled."""
        if self._end is not None or self._cancelled:
            fn(self)
        else:
            self._callbacks.append(fn)

    # --- dispatch -----------------------------------------------------------------------------------------

    def _sink(self, event: TurnEvent) -> None:
        """The connection's dispatch: straight into the stream; a failure carries the protocol's plan."""
        if type(event) is AudioReceived:
            self._stream.feed(event)
            if event.first:
                self.first_audio_or_done.set()
            return
        if isinstance(event, TurnFailed) and event.retry is not None:
            if not self._cancelled and self._closed_error is None:
                assert self._link is not None
                self._plan = event.retry
                self._dialer.hang_up(self._link, event)
                self._stream.feed(_RETRY)  # type: ignore[arg-type]
                return
            event = TurnFailed(event.turn_id, event.error)  # (not retried after all: the turn fails)
        self._settle(event)
        self._stream.feed(event)

    def _settle(self, event: TurnEvent) -> None:
        if self._end is not None:
            return
        self._end = event
        self.first_audio_or_done.set()
        if self._link is not None:
            self._dialer.hang_up(
                self._link, TurnDone(event.turn_id, cancelled=True) if self._cancelled else event
            )
        callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn(self)
            except Exception:  # a callback's bug must not break the turn
                logger.exception("turn %s: done callback failed", self.id)

    # --- commands -----------------------------------------------------------------------------------------

    async def send(self, text: str) -> None:
        if self._cancelled:
            return  # (a send racing a barge-in: nothing more is wanted)
        if self._done:
            raise TTSBridgeError(f"turn {self.id} is over; no more text can be sent")
        if self._facts is not None and self._facts.ended:
            raise TTSBridgeError(f"turn {self.id} was ended; no more text can be sent")
        if not text:
            return
        await self._command(lambda proto, now: proto.send_text(self._id, text, now))

    async def end(self) -> None:
        if self._done or self._cancelled or (self._facts is not None and self._facts.ended):
            return
        await self._command(lambda proto, now: proto.end_turn(self._id, now))

    async def _command(self, op: Callable[[TurnProtocol, float], None]) -> None:
        async with self._lock:
            if self._cancelled:
                return  # cancelled while this command waited: the text is not wanted any more
            try:
                link = await self._reopen()
            except TTSBridgeError:
                return  # the retry could not be made: the iterator reports it
            if link is None:
                return
            if isinstance(self._end, TurnFailed):
                raise self._end.error
            if self._end is not None:
                return  # over (done: its end is queued for the iterator)
            op(link.protocol, link.now())
            await self._flush(link)

    async def cancel(self) -> None:
        """Barge-in: no audio is yielded after this returns. The cancel is on the wire when it returns (bounded
        by ``cancel_timeout``); with ``wait_for_cancel_ack`` it also waits (bounded) for the server's answer
        when the protocol owes one."""
        await self._cancel(wait=self.wait_for_cancel_ack)

    async def _cancel(self, *, wait: bool) -> None:
        if self._cancelled and wait and self._cancelling is not None:
            with contextlib.suppress(asyncio.TimeoutError):  # a second cancel returns with the first
                await asyncio.wait_for(asyncio.shield(self._cancelling), 2 * self.cancel_timeout)
            return
        if self._cancelled or self._done:
            return  # a finished turn stays "done" (or "failed"): cancelling it changes nothing
        self._cancelling = asyncio.get_running_loop().create_future()
        try:
            await self._stop(wait=wait)
        finally:
            self._cancelling.set_result(None)

    async def _stop(self, *, wait: bool) -> None:
        self._cancelled = self._done = True
        self._wake.set()
        if self._resampler is not None:
            self._resampler.reset()
        link, stream = self._link, self._stream
        stream.stop()  # wake the consumer: it stops without yielding more
        if link is None or self._plan is not None:
            self._settle(TurnDone(self._id, cancelled=True))
            return
        link.protocol.cancel_turn(self._id, link.now())
        try:
            await link.flush(self.cancel_timeout)  # bounded: a full send buffer must not hold a barge-in up
        except (TTSBridgeError, asyncio.TimeoutError):
            pass
        else:
            if wait and self._end is None:
                await stream.wait_end(self.cancel_timeout)  # bounded by the protocol's own deadline too
        link.detach(self._id)  # a late acknowledgement, if any, is the connection's
        self._settle(TurnDone(self._id, cancelled=True))

    def abort(self, error: TTSBridgeError) -> None:
        """The provider is closing: a turn waiting to retry fails with ``error`` at once (never re-dials)."""
        if self._closed_error is None:
            self._closed_error = error
        self._wake.set()

    async def _reopen(self) -> Link | None:
        """The current link; after a retried failure, the next attempt's (dialled at the plan's time, cut
        short by a cancel). None when cancelled meanwhile. Raises (and ends the turn) when it cannot be made."""
        plan = self._plan
        if plan is None:
            return self._link
        loop = asyncio.get_running_loop()
        at = plan.dial_at if plan.dial_at is not None else plan.not_before
        if at > loop.time():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), at - loop.time())
        if self._cancelled:
            return None
        if self._plan is not plan:
            return self._link  # (opened meanwhile by the other side: the iterator or a command)
        self._plan = None
        try:
            if self._closed_error is not None:
                raise self._closed_error
            link, _ = await self._dialer.dial(plan.turn_id, plan.request, retry=True, timeout=self.timeout)
            await self._attach(link, plan.turn_id, plan.request)
        except TTSBridgeError as exc:
            self._settle(TurnFailed(plan.turn_id, exc))
            self._stream.feed(self._end)  # type: ignore[arg-type]
            raise
        if self._cancelled:  # cancelled while the new attempt was being opened: it is not wanted
            await self._withdraw(link)
            return None
        return self._link

    async def _withdraw(self, link: Link) -> None:
        """Cancel the turn's attempt on ``link`` (bounded) and let the link go."""
        link.protocol.cancel_turn(self._id, link.now())
        with contextlib.suppress(TTSBridgeError, asyncio.TimeoutError):
            await link.flush(self.cancel_timeout)
        link.detach(self._id)
        self._dialer.hang_up(link, TurnDone(self._id, cancelled=True))

    # --- audio --------------------------------------------------------------------------------------------

    def _rate(self) -> int:
        proto = self.protocol
        return (proto.sample_rate if proto is not None else None) or self.sample_rate

    def take_ready(self, max_bytes: int) -> bytes:
        """The audio (at :attr:`sample_rate`, resampled like the iterator's) of the whole chunks already
        received and not yet yielded, at most ``max_bytes``, in order; ``b""`` when none, once cancelled, and
        after the iteration ended. Never waits, raises, or consumes the turn's end, error or a retry. The
        chunks count as delivered (the protocol counted them on receipt)."""
        resampler = self._resampler
        if resampler is None or self._cancelled or self._done:
            return b""
        pcm = self._stream.take_ready(resampler.max_input(max_bytes))  # a budget the output cannot pass
        return resampler.process(pcm) if pcm else b""

    def take_received(self) -> bytes:
        if self._resampler is None or self._cancelled or self._done:
            return b""
        return self.take_ready(sys.maxsize) + self._resampler.flush()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        stream = self._stream
        try:
            while not self._cancelled and not self._done:
                ev = await stream.get()
                if self._cancelled:
                    return
                if type(ev) is AudioReceived:
                    resampler = self._resampler
                    if resampler is None or resampler.in_rate != self._rate():
                        tail = resampler.flush() if resampler is not None else b""  # a retry's new rate
                        resampler = self._resampler = StreamResampler(self._rate(), self.sample_rate)
                        if tail:
                            yield tail
                    out = resampler.process(ev.pcm)
                    if out:
                        yield out
                    continue
                if ev is _RETRY:
                    async with self._lock:
                        with contextlib.suppress(TTSBridgeError):  # (then its failure is on the stream)
                            await self._reopen()
                    continue
                self._done = True
                if isinstance(ev, TurnFailed):
                    self._error = ev.error
                tail = self._resampler.flush() if self._resampler is not None else b""
                if tail and not self._cancelled:
                    yield tail
                if self._error is not None:
                    raise self._error
                return
        finally:
            if not self._done and not self._cancelled:
                # The consumer left early (break, or its task was cancelled): nobody will read this turn.
                await self._cancel(wait=False)
