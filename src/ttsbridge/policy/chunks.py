"""Audio chunks already queued behind the one just read, joined to it (one buffer, one frame downstream); and
how far a turn's audio runs ahead of real-time playback, so a reader that is safely ahead can read less often.

A turn answers ``take_ready(max_bytes) -> bytes`` (:meth:`ttsbridge.turns.Turn.take_ready`): the PCM already
received, without waiting. Joining it to
the chunk just read saves a frame (and its per-frame cost in the framework) per queued chunk when the reader
fell behind; it never delays audio. Pure: no clock, no I/O.

:class:`Playout` is the second half: a server that renders faster than real time (as real ones do) keeps the
audio handed to the framework ahead of playback. Once that lead is comfortable, the reader may wait a little
before reading again: the chunks that arrive meanwhile queue in the turn (no wake-up per chunk) and go out
together, as fewer, larger frames. The first frame is never held, and a hold never lets the lead fall below
:data:`AHEAD_MARGIN_S`, so a real-time player never runs dry because of it (a gap the server causes is still
the server's: the reader is back at the next chunk as soon as the lead is short). :func:`hold_while_ahead` is
that reader loop, written once for both adapters; it waits only through the clock and the wait it is given.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

__all__ = [
    "AHEAD_HOLD_S",
    "AHEAD_MARGIN_S",
    "AHEAD_MIN_HOLD_S",
    "HoldWait",
    "Playout",
    "ReadyAudio",
    "hold_while_ahead",
    "joiner",
    "pcm16_bytes",
]

#: Audio (s) that must still be ahead of real-time playback after a hold (and the loop's lag on waking).
AHEAD_MARGIN_S = 0.15
#: The longest hold (s): how long a reader that is safely ahead waits before reading what arrived meanwhile.
AHEAD_HOLD_S = 0.25
#: No hold shorter than this (s): below it the wake-up saved is not worth a timer.
AHEAD_MIN_HOLD_S = 0.05


def _settle(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class HoldWait:
    """The wait of a reader's hold while ahead of playback: ``await hold(seconds)`` returns after ``seconds``
    (one future and one timer, no task), or at once after :meth:`release`, which also ends a wait in progress.

    The adapters release it when the turn's end is known (:meth:`ttsbridge.turns.Turn.add_done_callback`: all
    its audio has arrived) and on a barge-in. A hold is only for chunks still to come: once none will come, the
    reader takes what is queued and reaches the turn's end at once, so the turn's audio context closes (and
    the next turn, which plays after it, starts) without waiting out a hold."""

    __slots__ = ("_fut", "released")

    def __init__(self) -> None:
        self._fut: asyncio.Future[None] | None = None
        self.released = False

    def release(self) -> None:
        self.released = True
        if self._fut is not None:
            _settle(self._fut)

    async def __call__(self, seconds: float) -> None:
        if self.released:
            return
        loop = asyncio.get_running_loop()
        fut = self._fut = loop.create_future()
        timer = loop.call_later(seconds, _settle, fut)
        try:
            await fut
        finally:
            timer.cancel()
            self._fut = None


def pcm16_bytes(seconds: float, rate: int) -> int:
    """The bytes of ``seconds`` of mono PCM16 at ``rate`` (whole samples, at least one)."""
    return max(2, int(seconds * rate) * 2)


class ReadyAudio(Protocol):
    """What :func:`joiner` reads of a turn (:meth:`ttsbridge.turns.Turn.take_ready`; this module stays pure)."""

    def take_ready(self, max_bytes: int) -> bytes: ...


def joiner(turn: ReadyAudio, *, rate: int, coalesce_s: float) -> Callable[[bytes], bytes]:
    """``join(pcm)``: ``pcm`` followed by what ``turn.take_ready`` has queued, up to ``coalesce_s`` of PCM16 at
    ``rate``. Built once per turn (the lookup and the limit are not redone per chunk)."""
    take_ready = turn.take_ready
    limit = pcm16_bytes(coalesce_s, rate)

    def join(pcm: bytes) -> bytes:
        if len(pcm) >= limit:
            return pcm
        more = take_ready(limit - len(pcm))
        return pcm + more if more else pcm

    return join


class Playout:
    """The lead of a turn's audio over a real-time player that started at the turn's first frame.

    ``push(seconds, now)`` after every frame handed to the framework; ``hold(now)`` then says how long the
    reader may wait before reading again: as long as the lead stays at least :attr:`margin_s` meanwhile, at
    most :attr:`hold_s`, and 0 (read on at once) when that is shorter than :attr:`min_hold_s`. The holds grow
    with the lead (a faster server gets longer ones sooner). ``now`` is any monotonic clock in seconds."""

    __slots__ = ("_pushed", "_t0", "hold_s", "margin_s", "min_hold_s")

    def __init__(
        self,
        *,
        margin_s: float = AHEAD_MARGIN_S,
        hold_s: float = AHEAD_HOLD_S,
        min_hold_s: float = AHEAD_MIN_HOLD_S,
    ) -> None:
        self.margin_s = margin_s
        self.hold_s = hold_s
        self.min_hold_s = min_hold_s
        self._t0: float | None = None
        self._pushed = 0.0

    def push(self, seconds: float, now: float) -> None:
        if self._t0 is None:
            self._t0 = now
        self._pushed += seconds

    def lead(self, now: float) -> float:
        """Seconds of audio handed over and not yet played (0 before the first frame; < 0: the player ran dry)."""
        return 0.0 if self._t0 is None else self._pushed - (now - self._t0)

    def hold(self, now: float) -> float:
        if self._t0 is None:
            return 0.0  # the first frame is never held
        spare = min(self.hold_s, self.lead(now) - self.margin_s)
        return spare if spare >= self.min_hold_s else 0.0


async def hold_while_ahead(
    playout: Playout,
    now: Callable[[], float],
    wait: Callable[[float], Awaitable[object]],
    take_ready: Callable[[int], bytes],
    out: Callable[[bytes], Awaitable[None]],
    max_bytes: int,
    bytes_per_s: float,
) -> bool:
    """The adapters' reader while a turn is safely ahead of playback: ``await wait(s)`` (a :class:`HoldWait`) for as long as
    ``playout.hold`` allows (the chunks arriving meanwhile queue in the turn: no wake-up per chunk), then hand
    what queued to ``out`` in pieces of at most ``max_bytes``; again while the lead allows. False when a wait
    gathered nothing: the turn is over (its iterator says so) or the server stalled, and the caller holds no
    more in this turn (audio already received is never paced). The clock and the wait are the caller's."""
    while seconds := playout.hold(now()):
        await wait(seconds)
        got = False
        while pcm := take_ready(max_bytes):
            got = True
            await out(pcm)
            playout.push(len(pcm) / bytes_per_s, now())
        if not got:
            return False
    return True
