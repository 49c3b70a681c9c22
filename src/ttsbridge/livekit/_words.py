"""Estimated word timing as LiveKit aligned transcripts (the estimator is :mod:`ttsbridge.policy.words`)."""

from __future__ import annotations

from livekit.agents import tts
from livekit.agents.types import TimedString

from ttsbridge.policy.words import TimedWord

__all__ = ["push_timed_words"]


def push_timed_words(output_emitter: tts.AudioEmitter, words: list[TimedWord]) -> None:
    """Released words as LiveKit ``TimedString``\\ s (text with its whitespace, start and end in seconds)."""
    for w in words:
        output_emitter.push_timed_transcript(TimedString(text=w.text, start_time=w.start, end_time=w.end))
