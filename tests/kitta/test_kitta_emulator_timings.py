"""The Kitta endpoint's per-request timing record, keyed by ``request_id`` (see EmulatorStats.timings)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ttsbridge.emulator import Emulator


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
