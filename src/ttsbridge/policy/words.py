"""Word timing without provider timestamps: "what was heard, not what was sent", for both frameworks.

Neither Nineninesix nor Kitta reports word timestamps, so the adapters estimate when each word is spoken and
release it only once the audio that carries it has been received. An interruption then cuts the transcript
(Pipecat's LLM context, LiveKit's aligned transcript) near where playback stopped.

Units, weights and rates: :mod:`ttsbridge.policy.word_units`.

**Times** are seconds from the clock's time base (the first audio of the turn, or of the audio context after
:meth:`WordClock.restart`): a unit at weight offset ``o`` starts at ``o / r``. A unit is released:

* ``release="start"`` (Pipecat's ``add_word_timestamps`` takes start times): once its start lies within the
  audio received; its end is that estimate clipped to the audio received. A trailing word of streamed tokens
  is held until whitespace or the segment's end shows that it is complete. With ``hold`` (Pipecat, Kitta) a
  unit of a piece that another piece follows waits for its piece's reported end (exact times) unless its
  start is about to be played (``due_s``), so a first reply's words are not fixed at the prior's times;
* ``release="end"`` (LiveKit's ``TimedString`` carries an end): once its end lies within the audio received;
  the last unit sent so far is held until more text arrives or the segment ends (more audio may be its own).

At the end of a segment (:meth:`WordClock.end_segment`: the turn's ``done``, or the end of one HTTP request)
its real duration is known: the units still held get their exact share of it by weight, so the last one
ends with the audio, and the segment's measured rate calibrates :class:`SpeechRate`. Released start times
never decrease; with ``release="end"`` a unit never starts before the previous one ended.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ttsbridge.policy.word_units import (
    DEFAULT_CHARS_PER_SECOND,
    MAX_CHARS_PER_SECOND,
    MIN_CHARS_PER_SECOND,
    SpeechRate,
    _Segment,
    _Unit,
    clamp_rate,
    is_unspaced,
    spoken_weight,
)

if TYPE_CHECKING:
    from ttsbridge.text.spans import Span

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

#: Tolerance when comparing a time with the audio received (float sums of chunk durations).
_EPS = 1e-9

Release = Literal["start", "end"]


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


class WordClock:
    """Times the units of one turn against the audio received for it (see the module docstring).

    Feed it the text as it is sent (:meth:`add_text`) and the duration of every audio chunk as it arrives
    (:meth:`add_audio`); each returns the :class:`TimedWord`\\ s that became due. :meth:`end_segment` returns
    every unit still owed, timed by the segment's real duration, and starts the next segment after it.
    """

    def __init__(
        self,
        rate: SpeechRate | None = None,
        *,
        release: Release = "start",
        pieces: bool = False,
        hold: bool = False,
    ) -> None:
        if release not in ("start", "end"):
            raise ValueError(f"release must be 'start' or 'end', got {release!r}")
        if hold and release != "start":
            raise ValueError("hold is for release='start' only")
        #: ``release="start"`` with :attr:`pieces`: a unit of a piece that another piece follows is held
        #: until its piece's end is reported (:meth:`complete_text` then times it exactly) or until its
        #: start is due to be played (:meth:`add_audio`'s ``due_s``), whichever comes first. Free while
        #: audio runs ahead of playback; it never waits on anything but audio the provider still owes.
        self.hold = hold
        self._due_s = math.inf  # the last due_s given (restart: none)
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
        return self._seg.total_weight()

    # -- text

    def add_text(self, text: str, *, boundary: bool = False) -> None:
        """Text sent for synthesis, in order. ``boundary=True``: the text ends a unit (whole sentences);
        otherwise (streamed tokens) a trailing word is held until whitespace or the segment's end."""
        for ch in text:
            self._feed(ch)
        self._added(bool(text), boundary)

    def add_spans(self, spans: Iterable[Span], *, boundary: bool = False, piece: bool = True) -> None:
        """Normalized text (:class:`ttsbridge.text.Span`\\ s): unchanged spans as :meth:`add_text`, each
        rewritten span one unit (its text the LLM's, its weight its spoken form's) released whole once its
        end is in the audio (also with ``release="start"``, where its time is its end: a rewritten span is
        heard whole or not at all; its :class:`TimedWord` starts where it ends). ``piece=False``: nothing of it
        was sent (no piece of its own)."""
        seg, any_text = self._seg, False
        for span in spans:
            any_text = True
            if span.written == span.spoken:
                for ch in span.written:
                    self._feed(ch)
            else:
                seg.add_atomic(span.written, spoken_weight(span.spoken), len(span.spoken) - len(span.written))
        self._added(any_text and piece, boundary)

    def _added(self, piece: bool, boundary: bool) -> None:
        if boundary:
            self._close_pending()
        if self.pieces and piece:
            self._seg.piece_ends.append(self._segment_weight())
        self._quiet_until = 0.0

    def _feed(self, ch: str) -> None:
        if self._seg.feed(ch):
            self.unspaced = True

    def _close_pending(self) -> None:
        self._seg.close_pending()

    # -- audio

    def add_audio(self, seconds: float, *, due_s: float | None = None) -> list[TimedWord]:
        """Audio of ``seconds`` was received; return the units now due (see ``release``). ``due_s``
        (seconds from the time base; with :attr:`hold`): units that start by then are no longer held.

        Cheap per chunk: until the audio reaches the next unit's release time (or the rate cap), nothing
        is computed; the full check runs only when something may be due.
        """
        seg = self._seg
        if due_s is not None:
            self._due_s = due_s
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
                at = end if unit.atomic else start  # (a rewritten span: once all of it is in)
                if at > seg.audio_s + _EPS:
                    break
                if self.hold and len(seg.piece_ends) > 1 and self._offset_s + at > self._due_s:
                    break  # held: its piece's reported end will time it (see hold)
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
            due = (unit.offset + (unit.weight if unit.atomic else 0)) / cps
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
        self._chars_done += sum(u.sent for u in seg.units) + len(seg.lead)
        self._offset_s += duration
        self._seg = _Segment()
        self._cps = self._rate.chars_per_second
        self._quiet_until = 0.0
        return out

    def complete_text(self, chars: int, audio_s: float) -> list[TimedWord]:
        """The provider says the audio of the first ``chars`` characters of the text sent (since the time
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
            if total + unit.sent_trimmed > target:
                break
            total += unit.sent
            k += 1
        pending = seg.pending
        if k == len(seg.units) and pending is not None and total + pending.sent_trimmed <= target:
            self._close_pending()
            total += seg.units[-1].sent
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
        self._due_s = math.inf
        self._audio_total = 0.0
        self._cps = self._rate.chars_per_second
        self._quiet_until = 0.0

    def _emit(self, unit: _Unit, start: float, end: float) -> TimedWord:
        self._seg.next += 1
        if unit.atomic:
            # a rewritten span is timed where it has all been played: Pipecat commits a word at its start,
            # LiveKit's synchronizer counts a string's text as said between its start and end
            start = end
        start = max(self._offset_s + start, self._last_start)
        if self._release == "end":
            start = max(start, self._last_end)
        end = max(self._offset_s + end, start)
        self._last_start, self._last_end = start, end
        return TimedWord(unit.text, start, end)
