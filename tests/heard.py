"""What the caller really heard, for barge-in measurements with the emulator's tone voice (both frameworks).

The tone voice renders each transcript the server gets as one tone of its own frequency, 60 ms per character
of the trimmed transcript (at least 100 ms), one transcript after the other. So the true end of every word in
the audio is known, and a transcript kept after a barge-in can be compared with the playback position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import tone_duration


def word_ends(transcripts: list[str]) -> list[tuple[str, float]]:
    """Each word of the transcripts with the time its audio ends, as the tone voice renders them: one
    transcript after another, 60 ms per character of the trimmed transcript (at least 100 ms)."""
    out: list[tuple[str, float]] = []
    start = 0.0
    for text in transcripts:
        text = text.strip()
        for m in re.finditer(r"\S+", text):
            out.append((m.group(), start + 0.06 * m.end()))
        start += tone_duration(text)
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


def prefix_error(kept: str, transcripts: list[str], position: float) -> PrefixError:
    ends = word_ends(transcripts)
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
