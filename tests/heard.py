"""What the caller really heard, for barge-in measurements with the emulator's tone voice (both frameworks).

The tone voice renders each transcript the server gets as one tone of its own frequency, 60 ms per character
of the trimmed transcript (at least 100 ms), one transcript after the other. So the true end of every word in
the audio is known, and a transcript kept after a barge-in can be compared with the playback position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_duration


def word_ends(transcripts: list[str], *, ms_per_char: float = 60.0) -> list[tuple[str, float]]:
    """Each word of the transcripts with the time its audio ends, as a tone voice renders them: one
    transcript after another, ``ms_per_char`` (``tone``: 60) ms per character of the trimmed transcript (at
    least 100 ms)."""
    out: list[tuple[str, float]] = []
    start = 0.0
    for text in transcripts:
        text = text.strip()
        for m in re.finditer(r"\S+", text):
            out.append((m.group(), start + ms_per_char / 1000.0 * m.end()))
        start += tone_duration(text, ms_per_char=ms_per_char)
    return out


@dataclass(frozen=True)
class PrefixError:
    """How far the transcript the agent kept is from what was really heard at ``position``."""

    words: int  # words kept minus words whose audio had fully played (+: claims unheard words)
    ms: float  # audio between the end of the words truly heard and the end of the kept ones (0: exact)
    ms_to_position: float  # end of the kept words minus the playback position (exact: -next word < it <= 0)
    position: float
    kept: str

    def __str__(self) -> str:
        return (
            f"{self.words:+d} words, {self.ms:+.0f} ms (kept end {self.ms_to_position:+.0f} ms from the "
            f"playback position {self.position:.3f} s; kept {self.kept!r})"
        )


def prefix_error(
    kept: str, transcripts: list[str], position: float, *, ms_per_char: float = 60.0
) -> PrefixError:
    ends = word_ends(transcripts, ms_per_char=ms_per_char)
    n = len(kept.split())
    truth = sum(1 for _, end in ends if end <= position + 1e-6)
    kept_end = ends[n - 1][1] if n else 0.0
    heard_end = ends[truth - 1][1] if truth else 0.0
    return PrefixError(
        n - truth, (kept_end - heard_end) * 1000.0, (kept_end - position) * 1000.0, position, kept
    )


def sentence_frequencies(pcm: bytes, rate: int, transcripts: list[str]) -> list[float]:
    """Dominant frequency of the middle of each transcript's stretch of audio (the tone voice gives each
    transcript its own)."""
    out: list[float] = []
    start = 0.0
    for text in transcripts:
        dur = tone_duration(text)
        a = int((start + 0.05) * rate) * 2
        b = int((start + dur - 0.05) * rate) * 2
        out.append(dominant_frequency(pcm[a:b], rate))
        start += dur
    return out


def tone_voice(emu: Emulator, ms_per_char: float) -> str:
    """The id of a tone voice at ``ms_per_char`` on ``emu`` (``tone`` itself at 60; the emulator's voice speed
    knob otherwise: 90 is ~11 characters/s)."""
    if ms_per_char == 60.0:
        return TONE_VOICE_ID
    voice = f"tone-{ms_per_char:g}"
    if voice not in emu.voices:
        emu.voices.add_tone_voice(voice, ms_per_char=ms_per_char)
    return voice
