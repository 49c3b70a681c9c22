"""LiveKit coalescing with the real Nineninesix turn: a slow consumer (the turn's first chunk held until the
whole turn was received) makes the rest queue up, and the stream hands it to the emitter through
``take_ready``: every sample, in order, every word."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from lk_helpers import S1, S2, S3, duration_of, make_tts, pcm_of, run_stream, timed_words, tone_len, window

from support import wait_until
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_frequency
from ttsbridge.engine.turn import EngineTurn


async def test_the_nineninesix_turn_coalesces_queued_chunks_with_every_word(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = make_tts(emu)
    provider = t._turn_provider
    real_open = provider.open_turn
    taken: list[int] = []

    async def open_turn(**kwargs: Any) -> EngineTurn:
        turn = await real_open(**kwargs)
        assert isinstance(turn, EngineTurn)
        real_take, real_iterate = turn.take_ready, turn._iterate

        def take_ready(max_bytes: int) -> bytes:
            out = real_take(max_bytes)
            assert len(out) <= max_bytes
            taken.append(len(out))
            return out

        async def iterate() -> AsyncIterator[bytes]:
            ctx = turn
            assert ctx is not None
            await wait_until(lambda: ctx.facts.state.terminal, timeout=10.0)  # all of it queued
            async for pcm in real_iterate():
                yield pcm

        turn.take_ready = take_ready  # type: ignore[method-assign]
        turn._iterate = iterate  # type: ignore[method-assign]
        return turn

    monkeypatch.setattr(provider, "open_turn", open_turn)
    text = f"{S1} {S2} {S3}"
    try:
        events = await run_stream(t, text)
    finally:
        await t.aclose()
    assert sum(1 for n in taken if n) >= 2  # coalescing ran on the real turn
    total = tone_len(S1) + tone_len(S2) + tone_len(S3)
    assert duration_of(events) == pytest.approx(total, abs=0.03)  # nothing lost
    pcm = pcm_of(events)
    for s, start in ((S1, 0.0), (S2, tone_len(S1)), (S3, tone_len(S1) + tone_len(S2))):  # in order
        got = dominant_frequency(window(pcm, 24000, start + 0.05, tone_len(s) - 0.1), 24000)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    assert "".join(timed_words(events)) == text + " "  # every word, once, in order
