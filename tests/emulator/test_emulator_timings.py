"""The emulator's per-context timing record (``EmulatorStats.timings``), which bench/bench_overhead.py
subtracts from each turn's time to first audio."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from emu_wsclient import Session

from ttsbridge.emulator import Emulator
from ttsbridge.emulator.server import TIMINGS_KEPT, EmulatorStats


async def test_each_context_records_first_request_then_first_chunk(
    make_emulator: Callable[..., Awaitable[Emulator]],
) -> None:
    emu = await make_emulator(first_chunk_latency_s=0.05)
    async with await Session.open(emu) as s:
        await s.say("a", "First context, first part.")
        await s.say("a", "Second part.", cont=False)
        await s.say("b", "Another context.", cont=False)
        await s.turn("a")
        await s.turn("b")
    assert set(emu.stats.timings) == {"a", "b"}
    a = emu.stats.timings["a"]
    assert a.text == "First context, first part."  # the first request's text, not a later one
    assert a.first_chunk is not None
    # the first chunk waits for the configured latency after the first request (a lower bound by a sleep)
    assert a.first_chunk - a.first_request >= 0.05


def test_record_keeps_the_first_chunk_and_is_bounded() -> None:
    stats = EmulatorStats()
    stats.mark_chunk("never-requested")
    assert stats.timings == {}
    stats.mark_request("c", "x" * 200)
    stats.mark_chunk("c")
    first = stats.timings["c"].first_chunk
    stats.mark_request("c", "later")
    stats.mark_chunk("c")
    assert stats.timings["c"].first_chunk == first and len(stats.timings["c"].text) == 80
    for i in range(TIMINGS_KEPT + 5):
        stats.mark_request(f"k{i}", "")
    assert len(stats.timings) == TIMINGS_KEPT and "c" not in stats.timings
