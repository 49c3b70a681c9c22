"""Units, weights and rates of the word-timing estimator (:mod:`ttsbridge.policy.words`): a character's kind
and weight, the units of a segment as text is added, the rate clamp and :class:`SpeechRate`.

**Units.** Text is cut into *units*, each with the whitespace that follows it, so the units concatenate back
to exactly the text sent: a whitespace-delimited word (punctuation attached), or, in scripts written without
spaces, one character: a CJK ideograph, a kana, a Thai/Lao/Khmer/Myanmar letter with its combining marks.
Punctuation attaches to the unit before it; Latin words and numbers inside such text stay whole
("用Python写" -> "用", "Python", "写").

**Weights** (one scale for every script, "characters"): a word weighs its visible characters plus one for the
gap after it; an ideograph weighs 3, a kana 2 (Mandarin is spoken at ~4-5 characters/s and Japanese at
~7-8 morae/s, against ~15 characters/s of English), combining marks 0.

**Rate** ``r`` in weight per second of audio:

* the prior is :class:`SpeechRate` of the voice: :data:`DEFAULT_CHARS_PER_SECOND` until a completed segment
  was measured, then the measured rate (duration-weighted over the last ~60 s of audio);
* within a segment ``r`` is capped by *weight sent / audio received*: the audio received cannot be longer than
  the audio of all the text sent, so the true rate is at most that. ``r`` only ever drops within a segment;
* one clamp, :data:`MIN_CHARS_PER_SECOND`..:data:`MAX_CHARS_PER_SECOND`, for the prior, the learned rate and
  the cap (slow dictation to a 2x-speed voice reading CJK); it never lets a released time pass the audio.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_CHARS_PER_SECOND",
    "MAX_CHARS_PER_SECOND",
    "MIN_CHARS_PER_SECOND",
    "SpeechRate",
    "clamp_rate",
    "is_unspaced",
]

#: Prior speaking rate (weight per second, see the module docstring): conversational English is ~13-17
#: characters/s (eSpeak's default ~15). Until a completed segment calibrates it, words may be timed a little
#: early or late, so an interruption can keep or drop a word or two around where playback stopped.
DEFAULT_CHARS_PER_SECOND = 15.0
#: The one clamp on every rate (prior, learned, in-segment cap).
MIN_CHARS_PER_SECOND = 2.0
MAX_CHARS_PER_SECOND = 60.0


def clamp_rate(rate: float) -> float:
    """``rate`` within :data:`MIN_CHARS_PER_SECOND`..:data:`MAX_CHARS_PER_SECOND`."""
    return min(MAX_CHARS_PER_SECOND, max(MIN_CHARS_PER_SECOND, rate))


class SpeechRate:
    """The speaking rate of one voice, learned from completed segments (duration-weighted, decaying)."""

    def __init__(self, prior: float = DEFAULT_CHARS_PER_SECOND, *, memory_s: float = 60.0) -> None:
        self._prior = clamp_rate(prior)
        self._memory_s = memory_s
        self._chars = 0.0
        self._seconds = 0.0

    @property
    def chars_per_second(self) -> float:
        if self._seconds <= 0.0:
            return self._prior
        return clamp_rate(self._chars / self._seconds)

    def observe(self, chars: float, seconds: float) -> None:
        """Record a completed segment: ``chars`` of weight took ``seconds`` of audio."""
        if chars <= 0 or seconds <= 0.05:
            return
        self._chars += chars
        self._seconds += seconds
        if self._seconds > self._memory_s:
            scale = self._memory_s / self._seconds
            self._chars *= scale
            self._seconds *= scale

    def reset(self) -> None:
        """Forget what was learned (e.g. the voice changed): back to the prior."""
        self._chars = 0.0
        self._seconds = 0.0


# --- units -----------------------------------------------------------------------------------------------

_SPACE, _ATTACH, _SPLIT, _LETTER = range(4)
# Scripts written without spaces between words: every letter is a unit of its own.
_SPLIT_RANGES = (
    (0x0E00, 0x0EFF, 1),  # Thai, Lao
    (0x1000, 0x109F, 1),  # Myanmar
    (0x1780, 0x17FF, 1),  # Khmer
    (0x3040, 0x30FF, 2),  # Hiragana, Katakana
    (0x31F0, 0x31FF, 2),  # Katakana phonetic extensions
    (0x3400, 0x4DBF, 3),  # CJK extension A
    (0x4E00, 0x9FFF, 3),  # CJK unified ideographs
    (0xF900, 0xFAFF, 3),  # CJK compatibility ideographs
    (0xFF66, 0xFF9D, 2),  # half-width katakana
    (0x20000, 0x3FFFF, 3),  # CJK extensions B and later
)


@functools.lru_cache(maxsize=4096)
def _classify(ch: str) -> tuple[int, int]:
    """(kind, weight) of one character (cached: text is classified a character at a time)."""
    if ch.isspace():
        return _SPACE, 0
    cat = unicodedata.category(ch)
    if cat[0] == "M" or cat == "Cf":
        return _ATTACH, 0  # combining marks, joiners, variation selectors
    code = ord(ch)
    for lo, hi, weight in _SPLIT_RANGES:
        if lo <= code <= hi:
            return _SPLIT, weight
    if cat[0] == "P":
        return _ATTACH, 1
    return _LETTER, 1


def is_unspaced(ch: str) -> bool:
    """True for a character of a script written without spaces between words (CJK, kana, Thai...)."""
    return _classify(ch)[0] == _SPLIT


@dataclass
class _Unit:
    text: str
    offset: int  # weight before this unit within its segment
    weight: int
    split: bool  # a character of a script without spaces (no gap after it)
    sounding: bool  # holds a letter (not punctuation only)
    #: a rewritten span (``text`` is the LLM's, ``weight`` its spoken form's): released whole, once played
    atomic: bool = False
    #: characters sent minus characters written (the spoken form's length against ``text``'s)
    extra: int = 0

    @property
    def sent(self) -> int:
        """Characters of the text sent for this unit (with its whitespace)."""
        return len(self.text) + self.extra

    @property
    def sent_trimmed(self) -> int:
        """:attr:`sent` without the whitespace after it."""
        return len(self.text.rstrip()) + self.extra


@dataclass
class _Segment:
    units: list[_Unit] = field(default_factory=list)
    pending: _Unit | None = None  # the last unit while it may still grow
    lead: str = ""  # whitespace not yet attached to a unit
    weight: int = 0  # of the complete units (the pending one is added by WordClock.weight)
    audio_s: float = 0.0
    next: int = 0  # index of the next unit to release
    #: with ``pieces``: the weight at the end of each piece of text added whose audio is not reported
    #: complete yet (the provider renders the pieces one after the other and reports each one's end)
    piece_ends: list[int] = field(default_factory=list)

    def total_weight(self) -> int:
        """Weight of the complete units and the pending one."""
        return self.weight + (self.pending.weight if self.pending else 0)

    def feed(self, ch: str) -> bool:
        """One character of text added; True when it is of a script without spaces."""
        kind, weight = _classify(ch)
        pending = self.pending
        if kind == _SPACE:
            self.close_pending()
            if self.units and self.next < len(self.units):
                self.units[-1].text += ch  # the whitespace after a unit not yet released is its own
            else:
                self.lead += ch
            return False
        if pending is not None and (
            kind == _ATTACH
            or (kind == _SPLIT and not pending.sounding)
            or (kind == _LETTER and not (pending.split and pending.sounding))
        ):
            _grow(pending, ch, weight, split=kind == _SPLIT, sounding=kind != _ATTACH)
            return kind == _SPLIT
        self.close_pending()
        # A new unit weighs one for the gap after it, until it turns out to be a character of a CJK script.
        self.pending = _Unit(self.lead, self.total_weight(), 1, False, False)
        self.lead = ""
        _grow(self.pending, ch, weight, split=kind == _SPLIT, sounding=kind != _ATTACH)
        return kind == _SPLIT

    def close_pending(self) -> None:
        if self.pending is not None:
            self.units.append(self.pending)
            self.weight += self.pending.weight
            self.pending = None

    def add_atomic(self, written: str, weight: int, extra: int) -> None:
        """A rewritten span: one unit whose text is ``written`` (the LLM's) and whose weight is its spoken
        form's (:func:`spoken_weight`); ``extra``: characters sent minus ``len(written)``."""
        self.close_pending()
        self.units.append(_Unit(self.lead + written, self.total_weight(), weight, False, True, True, extra))
        self.weight += weight
        self.lead = ""


def spoken_weight(text: str) -> int:
    """The weight of ``text`` as units of its own (what a rewritten span's spoken form weighs)."""
    seg = _Segment()
    for ch in text:
        seg.feed(ch)
    seg.close_pending()
    return seg.weight


def _grow(unit: _Unit, ch: str, weight: int, *, split: bool, sounding: bool) -> None:
    unit.text += ch
    unit.weight += weight
    if split and not unit.split:
        unit.split = True
        unit.weight -= 1  # no gap after a character of a script without spaces
    unit.sounding = unit.sounding or sounding
