"""TurnStream.take_ready: the whole audio chunks already queued, never the end or an error; and the
resampler's input budget that bounds a coalesced frame (pure)."""

from __future__ import annotations

import asyncio
import random

import pytest

from ttsbridge.audio.resample import StreamResampler
from ttsbridge.engine import AudioReceived, TurnDone, TurnFailed
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSTimeoutError


def fed(*events: AudioReceived | TurnDone | TurnFailed) -> TurnStream:
    s = TurnStream()
    for ev in events:
        s.feed(ev)
    return s


async def rest(s: TurnStream) -> list[bytes]:
    async def run() -> list[bytes]:
        return [pcm async for pcm in s]

    return await asyncio.wait_for(run(), 5.0)


def test_take_ready_joins_whole_chunks_in_order_and_stops_before_the_one_that_would_pass() -> None:
    s = fed(*(AudioReceived("t", c) for c in (b"aa", b"bbbb", b"cc", b"dddddd")))
    assert s.take_ready(7) == b"aabbbb"  # b"cc" would make 8
    assert s.take_ready(1) == b""  # the next chunk alone is larger: nothing is split
    assert s.take_ready(2) == b"cc"
    assert s.take_ready(100) == b"dddddd"
    assert s.take_ready(100) == b""  # none left
    assert s.pending() == 0


async def test_take_ready_never_consumes_the_end_and_the_iterator_yields_the_rest() -> None:
    s = fed(AudioReceived("t", b"aa"), AudioReceived("t", b"bb"), TurnDone("t"), AudioReceived("t", b"zz"))
    assert s.take_ready(2) == b"aa"
    assert s.take_ready(100) == b"bb"
    assert s.take_ready(100) == b""  # stops at the end: nothing behind it is taken
    assert s.pending() == 2
    assert await rest(s) == []  # the iterator still sees the end


async def test_take_ready_never_consumes_an_error() -> None:
    s = fed(AudioReceived("t", b"aa"), TurnFailed("t", TTSTimeoutError("late")), AudioReceived("t", b"zz"))
    assert s.take_ready(100) == b"aa"
    assert s.take_ready(100) == b""
    with pytest.raises(TTSTimeoutError, match="late"):
        await rest(s)


async def test_take_ready_gives_nothing_once_stopped() -> None:
    s = fed(AudioReceived("t", b"aa"), AudioReceived("t", b"bb"))
    s.stop()
    s.feed(AudioReceived("t", b"late"))
    assert s.take_ready(100) == b""
    assert await rest(s) == []


async def test_take_ready_then_iteration_keeps_the_order() -> None:
    s = fed(*(AudioReceived("t", bytes([65 + i]) * 2) for i in range(6)), TurnDone("t"))
    it = s.__aiter__()
    got = [await it.__anext__(), s.take_ready(4)]
    got += await rest(s)
    assert b"".join(got) == b"AABBCCDDEEFF"


def test_take_ready_on_an_empty_stream_returns_at_once() -> None:
    assert TurnStream().take_ready(1 << 20) == b""  # a plain call: no loop, no waiting


@pytest.mark.parametrize(
    ("in_rate", "out_rate"),
    [(22050, 24000), (22050, 48000), (8000, 24000), (8000, 48000), (24000, 16000), (16000, 16000)],
)
def test_max_input_bounds_what_process_returns(in_rate: int, out_rate: int) -> None:
    rng = random.Random(in_rate * 7 + out_rate)
    r = StreamResampler(in_rate, out_rate)
    used = 0
    for i in range(120):
        limit = rng.choice([0, 1, 2, 100, 961, 2 * out_rate // 10, 5000])
        budget = r.max_input(limit)
        assert budget >= 0 and budget % 2 == 0
        n = rng.randint(0, budget) // 2 * 2 if i % 3 else budget  # often the whole budget
        out = r.process(rng.randbytes(n))
        assert len(out) <= limit
        used += budget > 0
        if i % 40 == 39:
            r.flush()  # a new turn starts from a clean count
    assert used >= 20  # the budget is not trivially zero


def test_max_input_of_a_passthrough_is_exact() -> None:
    r = StreamResampler(16000, 16000)
    assert r.max_input(3200) == 3200 and r.max_input(3201) == 3200
    r.process(b"abc")  # one byte carried
    assert r.max_input(3200) == 3199
