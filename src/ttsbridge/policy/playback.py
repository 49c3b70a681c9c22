"""What a phone carrier says it played: marks, their echoes, clears, and how long a hang-up may wait. Pure.

A carrier that plays a bot's audio (Twilio, Telnyx and Exotel: ``mark``; Plivo: ``checkpoint``) echoes a
mark once the audio sent before it has played. A :class:`PlaybackBook` is one call's record of them:

* the adapter asks :meth:`PlaybackBook.mark` for a mark at an audio position of one reply
  (:class:`ReplyPlayback`: one TTS turn, positions in seconds of its audio from its own start); the book
  refuses it when the call already has as many marks pending as the carrier allows (:attr:`max_pending`, one
  slot kept for the end of a reply) or when it lies closer than :attr:`min_gap_s` to the reply's last one;
* the serializer reports what went on the wire: audio (:meth:`audio_sent`, which advances the earliest time
  the carrier can have played it all, :attr:`play_end`: real time from arrival), a mark (:meth:`sent`), a
  ``clear`` (:meth:`cleared`: every mark not yet echoed becomes *cleared*, never *played*, whatever comes back
  for it later), an echo (:meth:`echoed`), the caller's hang-up (:meth:`hung_up`);
* a sent mark not echoed :attr:`margin_s` after its :attr:`PlaybackMark.play_end` is *lost*
  (:meth:`expire`); a call whose marks were lost and never echoed is :attr:`silent`: its carrier does not
  echo, and heard text stays the estimate;
* a reply's heard position (:attr:`ReplyPlayback.heard_s`) is the furthest echoed mark of it;
* :meth:`drain_deadline`: how long a hang-up may wait for the marks still out: until the audio sent can
  have played (:attr:`play_end` of the last mark) plus :attr:`margin_s`, and, for marks the transport has
  not sent yet, the audio they follow on top (it is sent at least at real time).

Times (``now``, ``since``) are the caller's clock in seconds; nothing here reads one.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "DEFAULT_MARGIN_S",
    "DEFAULT_MAX_PENDING",
    "DEFAULT_MAX_SPACING_S",
    "DEFAULT_MIN_GAP_S",
    "MarkState",
    "PlaybackBook",
    "PlaybackMark",
    "ReplyPlayback",
]

#: How much later than real time from its arrival the carrier may play audio (jitter buffer, network both
#: ways, its player) before a mark counts as lost; also the margin a hang-up waits past the audio sent.
DEFAULT_MARGIN_S = 1.5
#: Marks pending (sent, not yet echoed) per call. None of the four carriers' pages gives a limit; this keeps a
#: minute of word marks at most in flight.
DEFAULT_MAX_PENDING = 200
#: No two marks of a reply closer than this (s of audio): word boundaries closer than that share one.
DEFAULT_MIN_GAP_S = 0.08
#: A mark at least this often (s of audio) where the word clock knows no boundary (a word held for its
#: timing, a long word).
DEFAULT_MAX_SPACING_S = 0.5

MarkState = Literal["emitted", "sent", "played", "cleared", "lost"]

_EPS = 1e-9


@dataclass(eq=False)
class ReplyPlayback:
    """One reply's playback as the carrier reported it (one TTS turn, or one audio context of it)."""

    key: str
    #: whether a barge-in may cut it (Pipecat's uninterruptible speech is not)
    interruptible: bool = True
    #: the furthest position (s of the reply's audio) an echoed mark stands for
    heard_s: float = 0.0
    #: some mark of it was echoed as played
    acked: bool = False
    #: the mark at its end was echoed: the carrier played it all
    finished: bool = False
    #: a ``clear`` cut it (marks of it were pending then)
    cleared: bool = False
    #: a mark of it was lost (never echoed within the margin)
    lost: bool = False
    #: the last mark emitted for it (None: none yet)
    last_mark_s: float | None = None
    #: the position of its end mark (None: not emitted)
    end_s: float | None = None
    marks: int = 0


@dataclass(eq=False)
class PlaybackMark:
    """One mark: the reply it belongs to and the audio position (s of that reply's audio) it stands for."""

    name: str
    reply: ReplyPlayback
    position_s: float
    final: bool
    #: the call's audio the adapter had pushed when it placed the mark (s)
    pushed_s: float
    #: the adapter's own time for the position (Pipecat: the PTS it gives a word starting there), if known
    pts: int | None = None
    state: MarkState = "emitted"
    #: once sent: the earliest time the carrier can have played the audio before it (real time from arrival)
    play_end: float | None = None

    @property
    def resolved(self) -> bool:
        return self.state in ("played", "cleared", "lost")


@dataclass
class PlaybackBook:
    """One call's marks (see the module docstring)."""

    max_pending: int = DEFAULT_MAX_PENDING
    min_gap_s: float = DEFAULT_MIN_GAP_S
    margin_s: float = DEFAULT_MARGIN_S
    prefix: str = "tb"
    #: the earliest time the carrier can have played all the audio sent (real time from its arrival)
    play_end: float = 0.0
    #: audio sent so far (s)
    audio_sent_s: float = 0.0
    #: the caller hung up (or the stream stopped)
    ended: bool = False
    #: marks echoed as played / lost so far
    played: int = 0
    lost: int = 0
    #: the furthest adapter time (PTS) an echoed mark stands for, and one a lost mark stood for
    acked_pts: int | None = None
    lost_pts: int | None = None
    _marks: dict[str, PlaybackMark] = field(default_factory=dict)
    _open: list[PlaybackMark] = field(default_factory=list)  # emitted or sent, in order
    _count: int = 0
    _last_sent_pushed_s: float = 0.0

    def __post_init__(self) -> None:
        if self.max_pending < 2:
            raise ValueError(f"max_pending must be at least 2, got {self.max_pending!r}")
        if self.min_gap_s < 0 or self.margin_s < 0:
            raise ValueError("min_gap_s and margin_s must not be negative")

    # -- queries

    @property
    def pending(self) -> int:
        """Marks emitted or sent and not yet resolved (echoed, cleared or lost)."""
        return len(self._open)

    @property
    def acks_live(self) -> bool:
        """The carrier has echoed a mark as played on this call."""
        return self.played > 0

    @property
    def silent(self) -> bool:
        """Marks were lost and none was ever echoed: this carrier (or this transport) does not echo."""
        return self.lost > 0 and self.played == 0

    @property
    def emitted(self) -> int:
        """Marks placed on this call so far."""
        return self._count

    def open_marks(self) -> Iterator[PlaybackMark]:
        return iter(list(self._open))

    def find(self, name: str) -> PlaybackMark | None:
        return self._marks.get(name)

    # -- the adapter's side

    def mark(
        self, reply: ReplyPlayback, position_s: float, *, final: bool = False, pushed_s: float = 0.0
    ) -> PlaybackMark | None:
        """A mark at ``position_s`` of ``reply``'s audio, or None when the carrier's limit or the spacing
        says no (an end mark ignores the spacing and may take the last slot)."""
        if self.ended:
            return None
        room = self.max_pending - len(self._open)
        if room <= 0 or (room <= 1 and not final):
            return None
        if (
            not final
            and reply.last_mark_s is not None
            and position_s - reply.last_mark_s < self.min_gap_s - _EPS
        ):
            return None
        self._count += 1
        mark = PlaybackMark(f"{self.prefix}{self._count}", reply, position_s, final, pushed_s)
        self._marks[mark.name] = mark
        self._open.append(mark)
        reply.last_mark_s = position_s if reply.last_mark_s is None else max(reply.last_mark_s, position_s)
        reply.marks += 1
        if final:
            reply.end_s = position_s
        return mark

    # -- the wire's side

    def audio_sent(self, seconds: float, now: float) -> None:
        """``seconds`` of audio went to the carrier at ``now``."""
        if seconds > 0:
            self.play_end = max(self.play_end, now) + seconds
            self.audio_sent_s += seconds

    def sent(self, mark: PlaybackMark, now: float, *, behind_s: float = 0.0) -> None:
        """``mark`` went to the carrier at ``now``. ``behind_s``: audio placed before it that is not on the
        wire yet (a resampler's hold-back, a partial chunk): its echo certifies that much less."""
        if mark.state != "emitted":
            return
        mark.state = "sent"
        if behind_s > 0:
            mark.position_s = max(0.0, mark.position_s - behind_s)
            if mark.pts is not None:
                mark.pts -= int(behind_s * 1e9)
        mark.play_end = max(self.play_end, now)
        self._last_sent_pushed_s = max(self._last_sent_pushed_s, mark.pushed_s)

    def echoed(self, name: str) -> PlaybackMark | None:
        """The carrier echoed ``name``. Returns the mark (its state says what it meant: ``played``, or
        ``cleared`` when a ``clear`` was sent while it was pending), or None for a name this call never sent
        or an echo already counted."""
        mark = self._marks.get(name)
        if mark is None or mark.state == "played":
            return None
        if mark.state == "cleared":
            return mark  # returned by a clear: that audio was never played
        # The audio before this mark has played, so has the audio before every mark sent ahead of it (an
        # echo that overtook another, or one of a mark already given up as lost: late, not wrong).
        upto = self._open.index(mark) if mark in self._open else -1
        earlier = [m for m in self._open[:upto] if m.state == "sent"]
        for m in [*earlier, mark]:
            self._played(m)
        return mark

    def _played(self, mark: PlaybackMark) -> None:
        if mark.state == "lost":
            self.lost = max(0, self.lost - 1)
        self._resolve(mark, "played")
        self.played += 1
        reply = mark.reply
        reply.acked = True
        reply.heard_s = max(reply.heard_s, mark.position_s)
        if mark.final:
            reply.finished = True
        if mark.pts is not None:
            self.acked_pts = mark.pts if self.acked_pts is None else max(self.acked_pts, mark.pts)

    def cleared(self) -> list[PlaybackMark]:
        """A ``clear`` went to the carrier: every mark not yet echoed will never count as played."""
        out = [m for m in self._open]
        for mark in out:
            self._resolve(mark, "cleared")
            mark.reply.cleared = True
        return out

    def hung_up(self) -> list[PlaybackMark]:
        """The call ended (the caller hung up, the stream stopped): the marks out will not come back."""
        self.ended = True
        out = [m for m in self._open]
        for mark in out:
            self._resolve(mark, "lost")
        return out

    def expire(self, now: float) -> list[PlaybackMark]:
        """Sent marks not echoed :attr:`margin_s` after their audio can have played: lost."""
        out = [
            m
            for m in self._open
            if m.state == "sent" and m.play_end is not None and now >= m.play_end + self.margin_s
        ]
        for mark in out:
            self._resolve(mark, "lost")
            mark.reply.lost = True
            self.lost += 1
            if mark.pts is not None:
                self.lost_pts = mark.pts if self.lost_pts is None else max(self.lost_pts, mark.pts)
        return out

    def next_expiry(self) -> float | None:
        """When :meth:`expire` may next find a lost mark (None: no mark is out)."""
        ends = [m.play_end for m in self._open if m.state == "sent" and m.play_end is not None]
        return min(ends) + self.margin_s if ends else None

    def forget(self, reply: ReplyPlayback) -> None:
        """Drop ``reply``'s marks that were emitted but will never be sent (their frames were dropped)."""
        for mark in [m for m in self._open if m.reply is reply and m.state == "emitted"]:
            self._resolve(mark, "cleared")

    # -- the hang-up's side

    def drain_deadline(self, since: float) -> float | None:
        """Until when a hang-up that started waiting at ``since`` may wait for the marks still out (None:
        none is out). Moves only with what is sent, never with the clock: bounded."""
        if not self._open:
            return None
        unsent = [m for m in self._open if m.state == "emitted"]
        if unsent:
            behind = max(0.0, max(m.pushed_s for m in unsent) - self._last_sent_pushed_s)
            end = max(self.play_end, since) + behind
        else:
            end = max(m.play_end or since for m in self._open)
        return end + self.margin_s

    def _resolve(self, mark: PlaybackMark, state: MarkState) -> None:
        mark.state = state
        if mark in self._open:
            self._open.remove(mark)
        if len(self._marks) > 4 * self.max_pending:  # keep the names of recent marks only (late echoes)
            for name in list(self._marks)[: len(self._marks) - 2 * self.max_pending]:
                if self._marks[name].resolved:
                    del self._marks[name]
