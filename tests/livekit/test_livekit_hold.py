"""The LiveKit stream reads less often while a turn is safely ahead of playback (a server faster than real
time): what queued during a hold goes to the emitter as one buffer of at most ``_HOLD_FRAME_S``; nothing is
lost, reordered or held back at the end; a barge-in during a hold ends the stream at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from livekit.agents import tts
from lk_helpers import S1, S2, S3, duration_of, make_tts, pcm_of, run_stream, timed_words, tone_len, window

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_frequency
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.livekit._owner import StreamOwner
from ttsbridge.livekit._stream import _COALESCE_S, _HOLD_FRAME_S

TEXT = f"{S1} {S2} {S3}"


def _record_takes(t: Any, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of what the stream took from the turn with ``take_ready`` (joins and holds)."""
    provider = t._turn_provider
    real_open = provider.open_turn
    taken: list[int] = []

    async def open_turn(**kwargs: Any) -> EngineTurn:
        turn = await real_open(**kwargs)
        assert isinstance(turn, EngineTurn)
        real_take = turn.take_ready

        def take_ready(max_bytes: int) -> bytes:
            out = real_take(max_bytes)
            taken.append(len(out))
            return out

        turn.take_ready = take_ready  # type: ignore[method-assign]
        return turn

    monkeypatch.setattr(provider, "open_turn", open_turn)
    return taken


def _check_whole(events: list[tts.SynthesizedAudio], rate: int) -> None:
    assert duration_of(events) == pytest.approx(sum(tone_len(s) for s in (S1, S2, S3)), abs=0.03)
    pcm = pcm_of(events)
    for s, start in ((S1, 0.0), (S2, tone_len(S1)), (S3, tone_len(S1) + tone_len(S2))):  # in order
        got = dominant_frequency(window(pcm, rate, start + 0.05, tone_len(s) - 0.1), rate)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    assert "".join(timed_words(events)) == TEXT + " "  # every word, once, in order


async def _speak_at_4x(emu: Emulator, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], int]:
    """One stream of :data:`TEXT` from a server four times faster than playback, checked whole; what the
    stream took with ``take_ready`` (sizes) and its sample rate."""
    emu.config.realtime_factor = 4.0
    t = make_tts(emu)
    taken = _record_takes(t, monkeypatch)
    try:
        events = await run_stream(t, TEXT)
    finally:
        await t.aclose()
    _check_whole(events, t.sample_rate)
    return taken, t.sample_rate


async def test_a_fast_server_s_audio_goes_out_in_fewer_larger_buffers_and_whole(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken, rate = await _speak_at_4x(emu, monkeypatch)
    assert max(taken) > int(_COALESCE_S * rate) * 2  # held: more queued than a join may take
    assert max(taken) <= int(_HOLD_FRAME_S * rate) * 2


async def test_with_holds_off_nothing_is_taken_beyond_a_join(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(StreamOwner, "hold_when_ahead", False)
    taken, rate = await _speak_at_4x(emu, monkeypatch)
    assert max(taken, default=0) <= int(_COALESCE_S * rate) * 2


async def test_a_barge_in_during_a_hold_ends_the_stream_and_cancels_the_context(emu: Emulator) -> None:
    emu.config.realtime_factor = 4.0
    t = make_tts(emu)
    got = 0.0

    async def listen_then_leave() -> None:
        nonlocal got
        async with t.stream() as stream:
            stream.push_text(TEXT)
            stream.end_input()
            async for ev in stream:
                got += ev.frame.duration
                if got >= 1.0:  # well ahead of playback by now: the reader holds between reads
                    break
        # leaving the stream is LiveKit's barge-in: the context is cancelled on the server

    try:
        await asyncio.wait_for(listen_then_leave(), 20.0)
    finally:
        await t.aclose()
    assert got < sum(tone_len(s) for s in (S1, S2, S3)) - 0.5
    assert any(m.get("cancel") for _, m in emu.stats.messages)
