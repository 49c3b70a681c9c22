"""Word timing without provider timestamps: "what was heard, not what was sent", for both frameworks.

Neither Nineninesix nor Kitta reports word timestamps, so the adapters estimate when each word is spoken and
release it only once the audio that carries it has been received. An interruption then cuts the transcript
(Pipecat's LLM context, LiveKit's aligned transcript) near where playback stopped.

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

**Times** are seconds from the clock's time base (the first audio of the turn, or of the audio context after
:meth:`WordClock.restart`): a unit at weight offset ``o`` starts at ``o / r``. A unit is released:

* ``release="start"`` (Pipecat's ``add_word_timestamps`` takes start times): once its start lies within the
  audio received; its end is that estimate clipped to the audio received. A trailing word of streamed tokens
  is held until whitespace or the segment's end shows that it is complete;
* ``release="end"`` (LiveKit's ``TimedString`` carries an end): once its end lies within the audio received;
  the last unit sent so far is held until more text arrives or the segment ends (more audio may be its own).

At the end of a segment (:meth:`WordClock.end_segment`: the turn's ``done``, or the end of one HTTP request)
its real duration is known: the units still held get their exact share of it by weight, so the last one
ends with the audio, and the segment's measured rate calibrates :class:`SpeechRate`. Released start times
never decrease; with ``release="end"`` a unit never starts before the previous one ended.
"""

from __future__ import annotations

import functools
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_CHARS_PER_SECOND",
    "MAX_CHARS_PER_SECOND",
    "MIN_CHARS_PER_SECOND",
    "Release",
    "SpeechRate",
    "TimedWord",
    "WordClock",
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
#: Tolerance when comparing a time with the audio received (float sums of chunk durations).
_EPS = 1e-9

Release = Literal["start", "end"]


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


@dataclass(frozen=True)
class TimedWord:
    """One released unit: ``text`` as sent (with the whitespace after it), ``start``/``end`` in seconds."""

    text: str
    start: float
    end: float

    @property
    def word(self) -> str:
        """The unit without surrounding whitespace (what Pipecat's word frames carry)."""
        return self.text.strip()


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


class WordClock:
    """Times the units of one turn against the audio received for it (see the module docstring).

    Feed it the text as it is sent (:meth:`add_text`) and the duration of every audio chunk as it arrives
    (:meth:`add_audio`); each returns the :class:`TimedWord`\\ s that became due. :meth:`end_segment` returns
    every unit still owed, timed by the segment's real duration, and starts the next segment after it.
    """

    def __init__(
        self, rate: SpeechRate | None = None, *, release: Release = "start", pieces: bool = False
    ) -> None:
        if release not in ("start", "end"):
            raise ValueError(f"release must be 'start' or 'end', got {release!r}")
        self._rate = rate if rate is not None else SpeechRate()
        self._release = release
        self._cps = self._rate.chars_per_second
        self._seg = _Segment()
        self._offset_s = 0.0  # time base of the current segment (audio of the earlier segments)
        self._last_start = 0.0
        self._last_end = 0.0
        self._weight_done = 0  # weight of the ended segments since the time base
        self._chars_done = 0  # characters of the ended segments since the time base
        self._reports: int | None = 0  # Turn.rendered reports applied (None after restart: see there)
        self._audio_total = 0.0  # the sum of the chunks since the time base (the last unit ends there)
        # Audio (s, in the segment) below which add_audio has nothing to do: the next unit is not due and
        # the rate cap is not reached. 0 forces the full check (after any change of text, rate, segment).
        self._quiet_until = 0.0
        #: The provider reports the end of each piece of text added (:meth:`complete_text`; Kitta: each
        #: ``send`` is a segment, ended by its ``usage``): until then all audio received is the first open
        #: piece's, so the in-segment cap is that piece's weight, and no unit of a later piece is released.
        self.pieces = pieces
        #: True once text of a script without spaces was added (CJK, Thai...).
        self.unspaced = False
        #: The measured rate of the last ended segment (None when it had no text or no audio).
        self.last_segment_rate: float | None = None

    # -- queries

    @property
    def rate(self) -> float:
        """The rate the next unit is timed at (never rises within a segment)."""
        return self._cps

    @property
    def audio_seconds(self) -> float:
        """Audio received since the time base: no released time lies beyond it."""
        return self._offset_s + self._seg.audio_s

    @property
    def weight_total(self) -> int:
        """Weight of all text added since the time base."""
        return self._weight_done + self._segment_weight()

    @property
    def words_pending(self) -> int:
        """Complete units of the current segment not yet released."""
        return len(self._seg.units) - self._seg.next

    def _segment_weight(self) -> int:
        seg = self._seg
        return seg.weight + (seg.pending.weight if seg.pending else 0)

    # -- text

    def add_text(self, text: str, *, boundary: bool = False) -> None:
        """Text sent for synthesis, in order. ``boundary=True``: the text ends a unit (whole sentences);
        otherwise (streamed tokens) a trailing word is held until whitespace or the segment's end."""
        for ch in text:
            self._feed(ch)
        if boundary:
            self._close_pending()
        if self.pieces and text:
            self._seg.piece_ends.append(self._segment_weight())
        self._quiet_until = 0.0

    def _feed(self, ch: str) -> None:
        kind, weight = _classify(ch)
        seg = self._seg
        pending = seg.pending
        if kind == _SPACE:
            self._close_pending()
            if seg.units and seg.next < len(seg.units):
                seg.units[-1].text += ch  # the whitespace after a unit not yet released is its own
            else:
                seg.lead += ch
            return
        if kind == _SPLIT:
            self.unspaced = True
        if pending is not None and (
            kind == _ATTACH
            or (kind == _SPLIT and not pending.sounding)
            or (kind == _LETTER and not (pending.split and pending.sounding))
        ):
            self._grow(pending, ch, weight, split=kind == _SPLIT, sounding=kind != _ATTACH)
            return
        self._close_pending()
        # A new unit weighs one for the gap after it, until it turns out to be a character of a CJK script.
        seg.pending = _Unit(seg.lead, self._segment_weight(), 1, False, False)
        seg.lead = ""
        self._grow(seg.pending, ch, weight, split=kind == _SPLIT, sounding=kind != _ATTACH)

    @staticmethod
    def _grow(unit: _Unit, ch: str, weight: int, *, split: bool, sounding: bool) -> None:
        unit.text += ch
        unit.weight += weight
        if split and not unit.split:
            unit.split = True
            unit.weight -= 1  # no gap after a character of a script without spaces
        unit.sounding = unit.sounding or sounding

    def _close_pending(self) -> None:
        seg = self._seg
        if seg.pending is not None:
            seg.units.append(seg.pending)
            seg.weight += seg.pending.weight
            seg.pending = None

    # -- audio

    def add_audio(self, seconds: float) -> list[TimedWord]:
        """Audio of ``seconds`` was received; return the units now due (see ``release``).

        Cheap per chunk: until the audio reaches the next unit's release time (or the rate cap), nothing
        is computed; the full check runs only when something may be due.
        """
        seg = self._seg
        if seconds > 0.0:
            seg.audio_s += seconds
            self._audio_total += seconds
        if seg.audio_s + _EPS < self._quiet_until:
            return []
        weight = self._segment_weight()
        if seg.piece_ends:
            weight = seg.piece_ends[0]  # all audio so far is the first open piece's
        if weight > 0 and weight / self._cps < seg.audio_s:
            # More audio than the estimate allows for all text sent so far: the voice is slower than assumed.
            self._cps = max(MIN_CHARS_PER_SECOND, weight / seg.audio_s)
        out: list[TimedWord] = []
        while seg.next < len(seg.units):
            unit = seg.units[seg.next]
            if self._awaits_report(unit):
                break  # a later piece (or, releasing at the end, the last unit of the open one)
            start, end = unit.offset / self._cps, (unit.offset + unit.weight) / self._cps
            if self._release == "start":
                if start > seg.audio_s + _EPS:
                    break
            elif end > seg.audio_s + _EPS or (seg.next == len(seg.units) - 1 and seg.pending is None):
                break  # not within the audio yet, or the last unit sent so far
            out.append(self._emit(unit, start, min(end, seg.audio_s)))
        self._quiet_until = self._next_due(weight)
        return out

    def _next_due(self, weight: int) -> float:
        """The segment's audio time from which :meth:`add_audio` may have work: the next unit's release
        time or the rate cap (audio beyond all text sent), whichever comes first (inf: neither)."""
        seg = self._seg
        cps = self._cps
        cap = weight / cps if weight > 0 else math.inf
        if seg.piece_ends:
            cap = seg.piece_ends[0] / cps if seg.piece_ends[0] > 0 else math.inf
        if seg.next >= len(seg.units):
            return cap
        unit = seg.units[seg.next]
        if self._awaits_report(unit):
            return cap  # held until complete_text (which resets the bound)
        if self._release == "start":
            due = unit.offset / cps
        elif seg.next == len(seg.units) - 1 and seg.pending is None:
            due = math.inf  # held until more text arrives (add_text resets the bound)
        else:
            due = (unit.offset + unit.weight) / cps
        return min(cap, due)

    def _awaits_report(self, unit: _Unit) -> bool:
        """With ``pieces``: ``unit`` is not released before the open piece's end is reported. A unit of a later
        piece: its audio starts after that end. Releasing at the end, also the unit that ends the open piece:
        its audio ends there, however long the piece turns out to be."""
        ends = self._seg.piece_ends
        if not ends:
            return False
        if self._release == "end":
            return unit.offset + unit.weight >= ends[0]
        return unit.offset >= ends[0]

    def end_segment(self) -> list[TimedWord]:
        """The segment's audio is complete: release every unit still held, by its exact share of the weight
        over the real duration; calibrate the rate. The next text starts a new segment after this audio."""
        self._close_pending()
        seg = self._seg
        duration = seg.audio_s
        total = max(seg.weight, 1)
        out = [
            self._emit(unit, unit.offset / total * duration, (unit.offset + unit.weight) / total * duration)
            for unit in list(seg.units[seg.next :])
        ]
        if out and self._reports:  # split by reports: end the last unit at the chunks' own sum, exactly
            last = out[-1]
            out[-1] = TimedWord(last.text, last.start, max(last.start, self._audio_total))
            self._last_end = out[-1].end
        self.last_segment_rate = seg.weight / duration if seg.weight and duration > 0 else None
        if seg.weight and duration > 0:
            self._rate.observe(seg.weight, duration)
        self._weight_done += seg.weight
        self._chars_done += sum(len(u.text) for u in seg.units) + len(seg.lead)
        self._offset_s += duration
        self._seg = _Segment()
        self._cps = self._rate.chars_per_second
        self._quiet_until = 0.0
        return out

    def complete_text(self, chars: int, audio_s: float) -> list[TimedWord]:
        """The provider says the audio of the first ``chars`` characters of the text added (since the time
        base) ends at ``audio_s`` seconds of the audio (since the time base): Kitta's ``usage`` at the end of
        a segment. Those units are timed like :meth:`end_segment` (their exact share of that audio) and
        calibrate the rate; the text after them goes on as a new segment, with the audio received beyond
        ``audio_s``, timed at the calibrated rate. Returns the units now due. A report that covers no new
        whole unit, or audio not received yet, or all the text added (:meth:`end_segment` times that by the
        whole audio), changes nothing.

        Before a voice is calibrated this is what a turn knows of its real rate mid-turn: the first
        segment's end times the rest of the reply (the first reply of a session otherwise runs on the
        prior, :data:`DEFAULT_CHARS_PER_SECOND`)."""
        seg = self._seg
        target = chars - self._chars_done
        duration = audio_s - self._offset_s
        if target <= 0 or duration <= 0.0 or duration > seg.audio_s + _EPS:
            return []
        k, total = 0, 0
        for unit in seg.units:
            if total + len(unit.text.rstrip()) > target:
                break
            total += len(unit.text)
            k += 1
        pending = seg.pending
        if k == len(seg.units) and pending is not None and total + len(pending.text.rstrip()) <= target:
            self._close_pending()
            total += len(seg.units[-1].text)
            k += 1
        if k == 0 or (k == len(seg.units) and seg.pending is None):
            return []  # nothing new, or nothing after it: end_segment times it by the whole audio
        first = seg.units[:k]
        weight = first[-1].offset + first[-1].weight
        out = [
            self._emit(unit, unit.offset / weight * duration, (unit.offset + unit.weight) / weight * duration)
            for unit in list(seg.units[seg.next : k])
        ]
        self.last_segment_rate = weight / duration
        self._rate.observe(weight, duration)
        rest = seg.units[k:]
        for unit in rest:
            unit.offset -= weight
        if seg.pending is not None:
            seg.pending.offset -= weight
        self._seg = _Segment(
            units=rest,
            pending=seg.pending,
            lead=seg.lead,
            weight=seg.weight - weight,
            audio_s=seg.audio_s - duration,
            next=max(seg.next - k, 0),
            piece_ends=[end - weight for end in seg.piece_ends if end > weight],
        )
        self._weight_done += weight
        self._chars_done += total
        self._offset_s = audio_s
        self._cps = self._rate.chars_per_second
        self._quiet_until = 0.0
        return out + self.add_audio(0.0)

    def complete_rendered(self, rendered: Sequence[tuple[int, float]]) -> list[TimedWord]:
        """:meth:`complete_text` for each report of a turn's ``rendered`` (``(characters, audio seconds)``
        from the turn's start) not applied yet whose audio has been received. They count from the turn's
        start, so none is applied after :meth:`restart` (a new time base)."""
        out: list[TimedWord] = []
        while self._reports is not None and self._reports < len(rendered):
            chars, audio_s = rendered[self._reports]
            if audio_s - self._offset_s > self._seg.audio_s + _EPS:
                break  # its audio is not all here yet (a chunk still queued, the resampler's delay)
            self._reports += 1
            out += self.complete_text(chars, audio_s)
        return out

    def restart(self) -> None:
        """The audio these units were timed against is gone (Pipecat ended the audio context while the turn
        stayed open): drop the units still owed, and time the next text from 0 against the next audio. The
        learned rate is kept."""
        self._seg = _Segment()
        self._offset_s = 0.0
        self._last_start = self._last_end = 0.0
        self._weight_done = 0
        self._chars_done = 0
        self._reports = None
        self._audio_total = 0.0
        self._cps = self._rate.chars_per_second
        self._quiet_until = 0.0

    def _emit(self, unit: _Unit, start: float, end: float) -> TimedWord:
        self._seg.next += 1
        start = max(self._offset_s + start, self._last_start)
        if self._release == "end":
            start = max(start, self._last_end)
        end = max(self._offset_s + end, start)
        self._last_start, self._last_end = start, end
        return TimedWord(unit.text, start, end)
