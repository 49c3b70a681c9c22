"""A stream's end is never held behind a hold meant for later chunks: the agent's next speech (which plays
after this one) starts as soon as this turn's audio is all in.

The holds here are made endless (``Playout.hold`` always grants 1000 s once audio flowed): only the turn's end
can end them. Before the fix a stream could not finish (the reader waited out ``asyncio.sleep``); now each of
two back-to-back streams is whole, and its last event is its final one."""

from __future__ import annotations

import pytest
from lk_helpers import S1, S2, duration_of, make_tts, run_stream, timed_words, tone_len

from ttsbridge.emulator import Emulator
from ttsbridge.policy.chunks import Playout


@pytest.mark.parametrize("factor", [2.0, 4.0])
async def test_back_to_back_streams_end_when_their_audio_is_all_in(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch, factor: float
) -> None:
    emu.config.realtime_factor = factor

    def hold(self: Playout, now: float) -> float:
        return 0.0 if self._pushed == 0.0 else 1000.0

    monkeypatch.setattr(Playout, "hold", hold)
    t = make_tts(emu)
    try:
        for text in (S1, S2):
            events = await run_stream(t, text)  # bounded: a held end would time it out
            assert duration_of(events) == pytest.approx(tone_len(text), abs=0.03)  # nothing lost to the hold
            assert "".join(timed_words(events)) == text + " "
            assert events[-1].is_final
    finally:
        await t.aclose()
