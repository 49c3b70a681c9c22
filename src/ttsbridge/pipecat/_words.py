"""Word timing without provider timestamps: "what was heard, not what was sent".

Neither Nineninesix nor Kitta reports word timestamps, so the Pipecat adapters estimate when each word starts
in the audio and emit it only once the audio that carries it has been pushed. That way an interruption cuts
the transcript (the assistant message in the LLM context) near where playback stopped, instead of committing
text the caller never heard.

The estimate is a speaking rate in characters per second:

* a prior (:data:`DEFAULT_CHARS_PER_SECOND`, typical conversational speech), replaced by the rate measured
  over completed turns (:class:`SpeechRate`);
* within a turn, an upper bound: once more audio has arrived than the estimate allows for *all* text sent so
  far, the real rate must be lower (``chars_sent / audio_seconds``) and the estimate drops to it;
* at the end of a segment (the turn's ``done`` for a WebSocket turn, the end of each HTTP request), its real
  audio duration is known, and the remaining words are timed by their exact share of the characters.

The rate is only ever lowered within a segment, so estimated start times never move backwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Prior speaking rate (characters, spaces and punctuation included, per second of audio). Conversational
#: English is ~13-17 (eSpeak's default ~15); until a completed turn calibrates it, words may be timed a little
#: early or late, so an interruption can keep or drop a word or two around where playback stopped.
DEFAULT_CHARS_PER_SECOND = 15.0
_MIN_RATE = 1.0
_MAX_RATE = 200.0


def _clamp(rate: float) -> float:
    return min(_MAX_RATE, max(_MIN_RATE, rate))


class SpeechRate:
    """The speaking rate of one voice, learned from completed segments (duration-weighted, decaying)."""

    def __init__(self, prior: float = DEFAULT_CHARS_PER_SECOND, *, memory_s: float = 60.0) -> None:
        self._prior = _clamp(prior)
        self._memory_s = memory_s
        self._chars = 0.0
        self._seconds = 0.0

    @property
    def chars_per_second(self) -> float:
        if self._seconds <= 0.0:
            return self._prior
        return _clamp(self._chars / self._seconds)

    def observe(self, chars: int, seconds: float) -> None:
        """Record a completed segment: ``chars`` characters took ``seconds`` of audio."""
        if chars <= 0 or seconds <= 0.05:
            return
        self._chars += chars
        self._seconds += seconds
        if self._seconds > self._memory_s:
            scale = self._memory_s / self._seconds
            self._chars *= scale
            self._seconds *= scale

    def reset(self) -> None:
        """Forget what was learned (e.g. the voice changed)."""
        self._chars = 0.0
        self._seconds = 0.0


@dataclass
class _Word:
    text: str
    start: int  # character offset of the word's first character within the segment's text


@dataclass
class _Segment:
    length: int = 0
    words: list[_Word] = field(default_factory=list)
    pending: str = ""  # the last word while it may still continue (no whitespace after it yet)
    pending_start: int = 0
    audio_s: float = 0.0
    ended: bool = False


class WordClock:
    """Times the words of one turn against the audio pushed for it.

    Feed it the text as it is sent (:meth:`add_text`) and the duration of every audio chunk as it is pushed
    (:meth:`add_audio`); each call returns the ``(word, start_seconds)`` pairs that became due, where
    ``start_seconds`` counts from the start of the turn's audio. :meth:`end_segment` returns every word
    still owed, timed by the segment's real duration.
    """

    def __init__(self, rate: SpeechRate) -> None:
        self._rate = rate
        self._cps = rate.chars_per_second
        self._seg = _Segment()
        self._next = 0  # index of the next word to emit in the current segment
        self._offset_s = 0.0  # audio time at which the current segment started
        self._last_t = 0.0
        self.total_chars = 0
        self.total_audio_s = 0.0

    # -- text ---------------------------------------------------------------------------------------------

    def add_text(self, text: str, *, boundary: bool = False) -> None:
        """Text sent for synthesis. ``boundary=True`` ends a word at the end of ``text`` (whole sentences);
        otherwise (streamed tokens) a trailing word is held until whitespace or the segment's end shows it
        is complete."""
        seg = self._seg
        for ch in text:
            if ch.isspace():
                self._close_pending()
            else:
                if not seg.pending:
                    seg.pending_start = seg.length
                seg.pending += ch
            seg.length += 1
        self.total_chars += len(text)
        if boundary:
            self._close_pending()
            # Sentences sent one by one are spoken with a pause between them; count it as a character.
            seg.length += 1

    def _close_pending(self) -> None:
        seg = self._seg
        if seg.pending:
            seg.words.append(_Word(seg.pending, seg.pending_start))
            seg.pending = ""

    # -- audio --------------------------------------------------------------------------------------------

    def add_audio(self, seconds: float) -> list[tuple[str, float]]:
        """Audio of ``seconds`` was pushed; return the words whose estimated start it reached."""
        if seconds <= 0.0:
            return []
        seg = self._seg
        seg.audio_s += seconds
        self.total_audio_s += seconds
        # More audio than the estimate allows for all text sent so far: the voice is slower than assumed.
        if seg.length > 0 and seg.length / self._cps < seg.audio_s:
            self._cps = _clamp(seg.length / seg.audio_s)
        out: list[tuple[str, float]] = []
        while self._next < len(seg.words):
            word = seg.words[self._next]
            t = word.start / self._cps
            if t > seg.audio_s:
                break
            out.append(self._emit(word.text, self._offset_s + t))
            self._next += 1
        return out

    def end_segment(self) -> list[tuple[str, float]]:
        """The segment's audio is complete: time and return every remaining word by its exact share of the
        characters over the real duration. The next text starts a new segment after this audio."""
        self._close_pending()
        seg = self._seg
        out: list[tuple[str, float]] = []
        duration = seg.audio_s
        length = max(seg.length, 1)
        for word in seg.words[self._next :]:
            t = self._offset_s + (word.start / length) * duration
            out.append(self._emit(word.text, t))
        if seg.length and duration > 0:
            self._rate.observe(seg.length, duration)
        self._offset_s += duration
        self._seg = _Segment()
        self._next = 0
        self._cps = self._rate.chars_per_second
        return out

    def restart(self) -> None:
        """The audio context these words were timed against is gone (Pipecat ended it while the turn stayed
        open, e.g. a long LLM stall): drop the words still owed, and time the next text from 0 against the
        next audio context. The rate learned so far is kept."""
        self._close_pending()
        self._seg = _Segment()
        self._next = 0
        self._offset_s = 0.0
        self._last_t = 0.0
        self._cps = self._rate.chars_per_second

    def _emit(self, word: str, t: float) -> tuple[str, float]:
        t = max(t, self._last_t)
        self._last_t = t
        return word, t

    @property
    def words_pending(self) -> int:
        """Words of the current segment not yet returned (complete words only)."""
        return len(self._seg.words) - self._next
