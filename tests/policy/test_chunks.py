"""``joiner``: queued PCM joined to the chunk just read, bounded, and only when it fits."""

from __future__ import annotations

import asyncio

from ttsbridge.policy.chunks import joiner


class _Queued:
    def __init__(self, queued: bytes) -> None:
        self.queued = queued
        self.asked: list[int] = []

    def take_ready(self, max_bytes: int) -> bytes:
        self.asked.append(max_bytes)
        out, self.queued = self.queued[:max_bytes], self.queued[max_bytes:]
        return out


def test_joins_queued_pcm_up_to_the_bound() -> None:
    turn = _Queued(b"\x01" * 1000)
    out = joiner(turn, rate=1000, coalesce_s=0.2)(b"\x00" * 100)  # bound: 200 samples = 400 bytes
    assert out == b"\x00" * 100 + b"\x01" * 300
    assert turn.asked == [300]


def test_a_full_chunk_is_left_alone() -> None:
    turn = _Queued(b"\x01" * 10)
    assert joiner(turn, rate=1000, coalesce_s=0.2)(b"\x00" * 400) == b"\x00" * 400
    assert turn.asked == []


def test_nothing_queued_returns_the_chunk() -> None:
    assert joiner(_Queued(b""), rate=1000, coalesce_s=0.2)(b"\x00" * 4) == b"\x00" * 4


# --- Playout: holding the reader while the turn is safely ahead of real-time playback ---------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from ttsbridge.policy.chunks import Playout, hold_while_ahead  # noqa: E402


def test_the_first_frame_is_never_held_and_a_real_time_turn_never() -> None:
    p = Playout(margin_s=0.15, hold_s=0.25, min_hold_s=0.05)
    assert p.hold(10.0) == 0.0  # nothing pushed yet
    p.push(5.0, 10.0)  # even a first frame of 5 s: the hold comes after it, never before
    assert p.hold(10.0) == 0.25
    rt = Playout()
    for k in range(100):  # chunks arriving exactly at playback pace: the lead never grows
        rt.push(0.04, 10.0 + 0.04 * k)
        assert rt.hold(10.0 + 0.04 * k) == 0.0


def test_a_hold_keeps_the_margin_and_grows_with_the_lead() -> None:
    p = Playout(margin_s=0.15, hold_s=0.25, min_hold_s=0.05)
    p.push(0.3, 0.0)
    assert abs(p.hold(0.05) - 0.10) < 1e-9  # lead 0.25: a hold of 0.10 leaves the margin
    assert p.hold(0.12) == 0.0  # lead 0.18: a hold of 0.03 is not worth a timer
    assert p.hold(0.2) == 0.0  # lead 0.10: below the margin already
    p2 = Playout(margin_s=0.15, hold_s=0.25, min_hold_s=0.05)
    p2.push(0.3, 0.0)
    assert abs(p2.hold(0.0) - 0.15) < 1e-9  # lead 0.30: hold 0.15, after which 0.15 are still ahead
    p2.push(1.0, 0.0)
    assert p2.hold(0.0) == 0.25  # capped
    assert p2.lead(0.5) == 0.8


def _simulate(arrivals: list[float], chunk_s: float, hold: bool) -> list[float]:
    """The adapters' reader over chunks arriving at ``arrivals`` (s): the time each chunk is handed on. The
    holds are the adapters' own loop (:func:`hold_while_ahead`), run on a simulated clock."""
    clock = [arrivals[0]]
    out: list[float] = []
    n, nxt = len(arrivals), [0]

    async def wait(seconds: float) -> None:
        clock[0] += seconds

    def take_ready(max_bytes: int) -> bytes:  # what arrived meanwhile, one 2-byte chunk per call
        if nxt[0] < n and arrivals[nxt[0]] <= clock[0]:
            nxt[0] += 1
            return b"\0\0"
        return b""

    async def hand_on(pcm: bytes) -> None:
        out.append(clock[0])

    async def read() -> None:
        p = Playout()
        while nxt[0] < n:
            clock[0] = max(clock[0], arrivals[nxt[0]])  # the reader waits for the next chunk
            out.append(clock[0])
            p.push(chunk_s, clock[0])
            nxt[0] += 1
            if hold:
                await hold_while_ahead(p, lambda: clock[0], wait, take_ready, hand_on, 2, 2 / chunk_s)

    asyncio.run(read())
    return out


@settings(max_examples=300, deadline=None)
@given(
    pace=st.floats(min_value=0.5, max_value=8.0),
    jitter=st.lists(st.floats(min_value=0.0, max_value=0.3), min_size=5, max_size=120),
    stall_at=st.integers(min_value=0, max_value=119),
    stall=st.floats(min_value=0.0, max_value=1.5),
)
def test_holding_never_starves_a_real_time_player_the_server_did_not(
    pace: float, jitter: list[float], stall_at: int, stall: float
) -> None:
    """Chunks of 40 ms paced at ``pace`` x real time, each late by some jitter, one stall: a real-time player
    starting at the first frame needs chunk k at ``t0 + 0.04 k``. With the holds, every chunk is handed on
    no later than without them, or at least 100 ms before the player needs it (the margin is 150 ms)."""
    chunk_s = 0.04
    arrivals, t = [], 0.0
    for k, j in enumerate(jitter):
        t = max(t, k * chunk_s / pace + j + (stall if k >= stall_at else 0.0))
        arrivals.append(t)
    plain = _simulate(arrivals, chunk_s, hold=False)
    held = _simulate(arrivals, chunk_s, hold=True)
    assert len(held) == len(plain) and held[0] == plain[0]  # nothing lost; the first frame not delayed
    t0 = held[0]
    for k, (h, p) in enumerate(zip(held, plain, strict=False)):
        needed = t0 + k * chunk_s
        assert h <= p + 1e-9 or h <= needed - 0.1, (k, h, p, needed)  # >= 100 ms before it is needed
