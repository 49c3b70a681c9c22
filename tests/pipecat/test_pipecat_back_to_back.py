"""Back-to-back turns: a turn's end is never held behind a hold meant for later chunks.

Pipecat plays audio contexts one after another: the next turn's audio plays only once the turn before it has
closed its context (its ``TTSStoppedFrame``). A reader holding while ahead of playback (a server faster than
real time) must therefore stop holding as soon as the turn's end is known, or every back-to-back turn (two
``TTSSpeakFrame``s, a reply right after a greeting) starts late by what is left of the hold.

The holds here are made endless (``Playout.hold`` always grants 1000 s once audio flowed): only the turn's end
can end them. Before the fix the run could not finish (the reader waited out its timer); now both turns are
played whole, in order, each closed before the next one's audio."""

from __future__ import annotations

import pytest
from pc_helpers import S1, S2, audio_of, errors_of, make_tts, run, tone_len, words_of
from pipecat.frames.frames import Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStartedFrame, TTSStoppedFrame

from ttsbridge.emulator import Emulator
from ttsbridge.policy.chunks import Playout

RATE = 24000


def _endless_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    def hold(self: Playout, now: float) -> float:
        return 0.0 if self._pushed == 0.0 else 1000.0

    monkeypatch.setattr(Playout, "hold", hold)


def _sequence(down: list[Frame]) -> list[tuple[str, str | None]]:
    """The TTS frames downstream, runs of audio of one context collapsed: (kind, context id)."""
    seq: list[tuple[str, str | None]] = []
    for f in down:
        kind = {TTSStartedFrame: "start", TTSAudioRawFrame: "audio", TTSStoppedFrame: "stop"}.get(type(f))
        if kind is None:
            continue
        item = (kind, getattr(f, "context_id", None))
        if not seq or seq[-1] != item or kind != "audio":
            seq.append(item)
    return seq


@pytest.mark.parametrize("factor", [2.0, 4.0])
async def test_a_turn_closes_when_its_audio_is_all_in_not_when_a_hold_ends(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch, factor: float
) -> None:
    emu.config.realtime_factor = factor
    _endless_holds(monkeypatch)
    tts = make_tts(emu)
    down, up = await run(tts, [TTSSpeakFrame(S1), TTSSpeakFrame(S2)], rate=RATE)
    assert not errors_of(up)
    seq = _sequence(down)
    kinds = [k for k, _ in seq]
    assert kinds == ["start", "audio", "stop", "start", "audio", "stop"], seq
    first, second = seq[1][1], seq[4][1]
    assert first != second and seq[2][1] == first and seq[5][1] == second
    # nothing of either turn lost to the hold: each whole, in its own context
    assert len(audio_of(down, first)) / 2 / RATE == pytest.approx(tone_len(S1), abs=0.03)
    assert len(audio_of(down, second)) / 2 / RATE == pytest.approx(tone_len(S2), abs=0.03)
    assert " ".join(words_of(down)) == f"{S1} {S2}"
