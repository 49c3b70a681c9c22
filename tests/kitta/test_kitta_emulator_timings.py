"""The Kitta endpoint's per-request timing record, keyed by ``request_id`` (see EmulatorStats.timings)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ttsbridge.emulator import Emulator, tone_duration


async def test_request_records_first_text_then_first_audio(
    kemu: Emulator, make_provider: Callable[..., Any]
) -> None:
    provider = make_provider(standby=False)

    async def synthesize() -> bytes:
        return b"".join([c async for c in provider.synthesize("Timed request.", sample_rate=16000)])

    pcm = await asyncio.wait_for(synthesize(), 10.0)
    assert pcm
    (request_id,) = kemu.stats.kitta_request_ids
    t = kemu.stats.timings[request_id]
    assert "Timed request." in t.text
    assert t.first_chunk is not None and t.first_chunk >= t.first_request


async def test_paced_audio_comes_no_faster_than_its_realtime_factor(
    kemu: Emulator, make_provider: Callable[..., Any]
) -> None:
    # realtime_factor 4: the frames of a segment go out on the session's audio clock, each when it is due, so
    # the last comes (duration - one frame) / 4 after the first at the earliest (a lower bound: load only adds)
    kemu.config.kitta.realtime_factor = 4.0
    provider = make_provider(standby=False)
    text = "A paced sentence of a few words."
    arrivals: list[float] = []
    loop = asyncio.get_running_loop()

    async def run() -> None:
        async for _ in provider.synthesize(text, sample_rate=24000):
            arrivals.append(loop.time())

    await asyncio.wait_for(run(), 10.0)
    frame_s = kemu.config.kitta.chunk_ms / 1000
    assert len(arrivals) >= 10
    assert arrivals[-1] - arrivals[0] >= (tone_duration(text) - 2 * frame_s) / 4
