"""TurnStream (delivery queue, bounded waits without a task per chunk), Backoff and KeyedPool."""

from __future__ import annotations

import asyncio

import pytest

from ttsbridge.engine import AudioReceived, Backoff, TurnDone, TurnFailed
from ttsbridge.engine.pool import KeyedPool
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError

# --- TurnStream ---------------------------------------------------------------------------------------------


async def test_stream_yields_pcm_in_order_and_stops_at_done() -> None:
    s = TurnStream()
    for ev in (AudioReceived("t", b"ab"), AudioReceived("t", b"cd"), TurnDone("t"), AudioReceived("t", b"x")):
        s.feed(ev)
    got = await asyncio.wait_for(_all(s), 5.0)
    assert got == [b"ab", b"cd"]


async def test_stream_raises_the_error_of_a_failed_turn() -> None:
    s = TurnStream()
    s.feed(AudioReceived("t", b"ab"))
    s.feed(TurnFailed("t", TTSTimeoutError("late")))
    with pytest.raises(TTSTimeoutError, match="late"):
        await asyncio.wait_for(_all(s), 5.0)


async def test_stop_drops_what_is_queued_and_wakes_a_waiting_consumer() -> None:
    s = TurnStream()
    consumer = asyncio.ensure_future(_all(s))
    await asyncio.sleep(0)
    s.feed(AudioReceived("t", b"ab"))
    s.stop()
    s.feed(AudioReceived("t", b"late"))
    assert await asyncio.wait_for(consumer, 5.0) == []


async def test_get_with_a_deadline_returns_none_when_nothing_comes() -> None:
    s = TurnStream()
    loop = asyncio.get_running_loop()
    assert await asyncio.wait_for(s.get(loop.time() + 0.02), 5.0) is None
    s.feed(TurnDone("t"))
    assert await s.get(loop.time() - 1.0) == TurnDone("t")  # queued: returned even past the deadline


async def test_waiting_creates_no_task() -> None:
    s = TurnStream()
    loop = asyncio.get_running_loop()
    before = len(asyncio.all_tasks())
    waiter = loop.create_task(s.get(loop.time() + 30.0))
    await asyncio.sleep(0)
    assert len(asyncio.all_tasks()) == before + 1  # only the consumer's own task
    s.feed(TurnDone("t"))
    assert await asyncio.wait_for(waiter, 5.0) == TurnDone("t")


async def _all(s: TurnStream) -> list[bytes]:
    return [pcm async for pcm in s]


# --- Backoff ------------------------------------------------------------------------------------------------


def test_backoff_is_exponential_with_full_jitter_and_capped() -> None:
    b = Backoff(base=0.2, factor=2.0, cap=1.0)
    assert [b.delay(n, rand=lambda: 1.0) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]
    assert b.delay(3, rand=lambda: 0.0) == 0.0
    assert 0.0 <= b.delay(2) <= 0.4


def test_backoff_equal_jitter_never_falls_below_its_floor() -> None:
    b = Backoff(base=1.0, floor=0.5)
    assert b.delay(1, rand=lambda: 0.0) == 0.5 and b.delay(1, rand=lambda: 1.0) == 1.0


def test_backoff_waits_at_least_retry_after_bounded() -> None:
    b = Backoff(base=0.2, max_retry_after=5.0)
    assert b.delay(1, retry_after=3.0, rand=lambda: 0.0) == 3.0
    assert b.delay(1, retry_after=60.0) == 5.0
    assert b.delay(1, retry_after=-1.0, rand=lambda: 1.0) == 0.2  # a bogus one changes nothing


@pytest.mark.parametrize("kw", [{"base": -1.0}, {"cap": -0.1}, {"factor": 0.5}, {"floor": 1.5}])
def test_backoff_rejects_bad_options(kw: dict[str, float]) -> None:
    with pytest.raises(TTSInvalidOptionError):
        Backoff(**kw)


# --- KeyedPool ----------------------------------------------------------------------------------------------


class FakeConn:
    def __init__(self, key: str) -> None:
        self.key, self.ok, self.old, self.closed, self.retired = key, True, False, False, False

    def usable(self) -> bool:
        return self.ok and not self.closed and not self.retired

    def expired(self) -> bool:
        return self.old

    def retire(self) -> None:
        self.retired = True

    @property
    def age(self) -> float:
        return 0.0

    async def close(self) -> None:
        self.closed = True


def pool(*, shared: bool = True) -> tuple[KeyedPool[str, FakeConn], list[FakeConn]]:
    made: list[FakeConn] = []

    async def factory(key: str, timeout: float | None) -> FakeConn:
        await asyncio.sleep(0)
        made.append(FakeConn(key))
        return made[-1]

    return KeyedPool(factory, shared=shared, name="test"), made


async def test_shared_pool_reuses_per_key_and_replaces_expired_or_unusable() -> None:
    p, _made = pool()
    a1 = await asyncio.wait_for(p.acquire("a"), 5.0)
    a2 = await asyncio.wait_for(p.acquire("a"), 5.0)
    b = await asyncio.wait_for(p.acquire("b"), 5.0)
    assert a1 is a2 and a1 is not b and p.opened == 2
    a1.old = True
    a3 = await asyncio.wait_for(p.acquire("a"), 5.0)
    assert a3 is not a1 and a1.closed
    a3.ok = False
    a4 = await asyncio.wait_for(p.acquire("a"), 5.0)
    assert a4 is not a3 and p.get("a") is a4 and a3.retired
    p.discard("a", a4)
    assert p.get("a") is None


async def test_concurrent_acquires_of_one_key_open_one_connection() -> None:
    p, made = pool()
    got = await asyncio.wait_for(asyncio.gather(*(p.acquire("a") for _ in range(5))), 5.0)
    assert len(made) == 1 and all(c is made[0] for c in got)


async def test_exclusive_pool_hands_out_its_standby_once() -> None:
    p, _made = pool(shared=False)
    standby = await p.prefill("a")
    assert await p.prefill("a") is standby
    assert await p.acquire("a") is standby and p.get("a") is None
    fresh = await p.acquire("a")
    assert fresh is not standby and p.get("a") is None


async def test_aclose_during_a_connect_closes_the_new_connection() -> None:
    p, made = pool()
    task = asyncio.ensure_future(p.acquire("a"))
    await asyncio.sleep(0)
    await p.aclose()
    with pytest.raises(TTSConnectionError, match="closed"):
        await asyncio.wait_for(task, 5.0)
    assert made and made[0].closed and p.get("a") is None
    assert (await p.acquire("a")) is not made[0]  # usable again afterwards
