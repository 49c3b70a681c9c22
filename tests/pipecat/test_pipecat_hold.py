"""The Pipecat reader reads less often while a turn is safely ahead of playback (a server faster than real
time): what queued during a hold goes out as frames of at most ``hold_frame_s``, and so does what was queued
behind a chunk when the audio came in a burst (an unpaced server); nothing is lost or reordered, every word comes
once; with ``hold_when_ahead = False`` no frame is larger than a join's bound."""

from __future__ import annotations

import pytest
from pc_helpers import (
    S1,
    S2,
    S3,
    audio_frames,
    audio_of,
    errors_of,
    make_tts,
    run,
    segment,
    tone_len,
    words_of,
)
from pipecat.frames.frames import Frame, LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_frequency
from ttsbridge.pipecat import NineninesixTTSService

RATE = 24000
FRAMES = [LLMFullResponseStartFrame(), LLMTextFrame(f"{S1} {S2} {S3}"), LLMFullResponseEndFrame()]


def _check_whole(down: list[Frame], total: float) -> None:
    pcm = audio_of(down)
    assert len(pcm) / 2 / RATE == pytest.approx(total, abs=0.03)  # nothing lost
    for s, start in ((S1, 0.0), (S2, tone_len(S1)), (S3, tone_len(S1) + tone_len(S2))):  # in order
        got = dominant_frequency(segment(pcm, RATE, start + 0.05, tone_len(s) - 0.1), RATE)
        assert got == pytest.approx(tone_frequency(s), rel=0.01), s
    assert " ".join(words_of(down)) == f"{S1} {S2} {S3}"  # every word, once, in order


async def test_a_fast_server_s_audio_goes_out_in_fewer_larger_frames_and_whole(emu: Emulator) -> None:
    emu.config.realtime_factor = 4.0  # the server renders four times faster than playback
    tts = make_tts(emu)
    down, up = await run(tts, list(FRAMES), rate=RATE)
    assert not errors_of(up)
    sizes = [len(f.audio) for f in audio_frames(down)]
    assert max(sizes) > NineninesixTTSService.coalesce_audio_s * RATE * 2  # held: larger than a join
    assert max(sizes) <= NineninesixTTSService.hold_frame_s * RATE * 2
    _check_whole(down, sum(tone_len(s) for s in (S1, S2, S3)))


async def test_a_burst_s_queued_audio_goes_out_in_frames_of_up_to_hold_frame_s_and_whole(
    emu: Emulator,
) -> None:
    emu.config.realtime_factor = 0.0  # unpaced: the turn's audio arrives as fast as the server makes it
    tts = make_tts(emu)
    down, up = await run(tts, list(FRAMES), rate=RATE)
    assert not errors_of(up)
    sizes = [len(f.audio) for f in audio_frames(down)]
    assert sizes[0] <= NineninesixTTSService.coalesce_audio_s * RATE * 2  # the first frame: a join at most
    assert max(sizes) > NineninesixTTSService.coalesce_audio_s * RATE * 2  # then larger frames
    assert max(sizes) <= NineninesixTTSService.hold_frame_s * RATE * 2
    _check_whole(down, sum(tone_len(s) for s in (S1, S2, S3)))


async def test_with_holds_off_no_frame_is_larger_than_a_join(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    emu.config.realtime_factor = 4.0
    monkeypatch.setattr(NineninesixTTSService, "hold_when_ahead", False)
    tts = make_tts(emu)
    down, up = await run(tts, list(FRAMES), rate=RATE)
    assert not errors_of(up)
    assert max(len(f.audio) for f in audio_frames(down)) <= NineninesixTTSService.coalesce_audio_s * RATE * 2
    _check_whole(down, sum(tone_len(s) for s in (S1, S2, S3)))
