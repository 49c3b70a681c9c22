"""What a Kitta session knows about its text and audio, pure: the text queue within the limits, the flushed
(billed) segments and their delivery status (pending -> delivering -> done, so a retry replays only segments
none of whose audio was delivered), and the reordering of audio frames by sequence number."""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field
from typing import Final

from ttsbridge.kitta.models import AudioEvent, FlushEvent, KittaLimits, StopEvent, TextEvent
from ttsbridge.kitta.wire import KittaLimitError, encode, split_text

__all__ = ["MAX_HELD_FRAMES", "AudioOrder", "Segment", "SegmentStatus", "Segments", "TextQueue"]

logger = logging.getLogger("ttsbridge.kitta")

#: Out-of-order audio frames held before giving up on the gap and releasing them in order anyway.
MAX_HELD_FRAMES: Final = 64


class SegmentStatus(str, enum.Enum):
    PENDING = "pending"  # flushed (or queued), no audio yet: refunded if it fails -> safe to replay
    DELIVERING = "delivering"  # some audio delivered, no usage yet: must never be replayed
    DONE = "done"  # usage received: complete


@dataclass
class Segment:
    """One flushed (billed) segment of this session."""

    index: int
    text: str
    status: SegmentStatus = SegmentStatus.PENDING
    units: int | None = None


@dataclass
class Segments:
    """The segments of one session, in order; audio and usage belong to the first one not done."""

    items: list[Segment] = field(default_factory=list)

    def add(self, text: str) -> None:
        self.items.append(Segment(index=len(self.items), text=text))

    def head(self) -> Segment | None:
        for seg in self.items:
            if seg.status is not SegmentStatus.DONE:
                return seg
        return None

    def audio(self) -> None:
        """Audio of the head segment was received (held or delivered): it is committed, never replayed."""
        seg = self.head()
        if seg is not None:
            seg.status = SegmentStatus.DELIVERING

    def usage(self, units: int) -> None:
        seg = self.head()
        if seg is not None:
            seg.status = SegmentStatus.DONE
            seg.units = units

    def finish(self) -> None:
        for seg in self.items:
            seg.status = SegmentStatus.DONE

    def all_done(self) -> bool:
        return self.head() is None

    def can_resume(self) -> bool:
        return not any(s.status is SegmentStatus.DELIVERING for s in self.items)

    def pending(self) -> list[str]:
        return [s.text for s in self.items if s.status is SegmentStatus.PENDING]


@dataclass
class AudioOrder:
    """Releases audio frames in ``seq`` order; frames without ``seq`` pass in arrival order."""

    label: str = ""
    next_seq: int = 0
    held: dict[int, AudioEvent] = field(default_factory=dict)

    def push(self, event: AudioEvent) -> list[AudioEvent]:
        if event.seq is None:
            return [event]
        if event.seq < self.next_seq or event.seq in self.held:
            logger.warning("kitta %s: dropping duplicate/late audio seq=%d", self.label, event.seq)
            return []
        self.held[event.seq] = event
        ready: list[AudioEvent] = []
        while self.next_seq in self.held:
            ready.append(self.held.pop(self.next_seq))
            self.next_seq += 1
        if len(self.held) > MAX_HELD_FRAMES:
            logger.warning(
                "kitta %s: audio sequence gap at %d; releasing held frames", self.label, self.next_seq
            )
            ready.extend(self.drain())
        return ready

    def drain(self) -> list[AudioEvent]:
        """Every held frame, in order (the gap is given up)."""
        events = [self.held[k] for k in sorted(self.held)]
        if events:
            self.next_seq = (events[-1].seq or 0) + 1
        self.held.clear()
        return events


@dataclass
class TextQueue:
    """The text side of one session: text, flush and stop frames in order, the unflushed buffer, and the
    segments they make. Applies the client-side limits (text split at ``max_text_chars``, segment flushed
    early before ``max_segment_chars``, session capped at ``max_session_units``)."""

    limits: KittaLimits
    label: str = ""
    segments: Segments = field(default_factory=Segments)
    frames: list[tuple[str, bytes]] = field(default_factory=list)
    buffer: list[str] = field(default_factory=list)
    buffer_chars: int = 0
    #: Characters queued for sending in this session (our estimate of billable units: characters).
    units_sent: int = 0
    stop_requested: bool = False

    def text(self, text: str) -> None:
        """Queue ``text``; raises :class:`KittaLimitError` (queueing nothing) over the session's units."""
        lim = self.limits
        total = self.units_sent + len(text)
        if total > lim.max_session_units:
            raise KittaLimitError(
                "max_session_units",
                total,
                lim.max_session_units,
                f"kitta: this text ({len(text)} characters) would bring the session to {total} units, "
                f"over the limit of {lim.max_session_units}; nothing was sent. Start a new generation "
                "for the rest.",
            )
        # Split at sentence/word boundaries into pieces that fit both a text event and a segment, so that an
        # early flush always falls between two pieces.
        for piece in split_text(text, min(lim.max_text_chars, lim.max_segment_chars)):
            if self.buffer_chars + len(piece) > lim.max_segment_chars:
                self.flush(early=True)
            self.frames.append(("text", encode(TextEvent(text=piece))))
            self.buffer.append(piece)
            self.buffer_chars += len(piece)
            self.units_sent += len(piece)

    def flush(self, *, early: bool = False) -> bool:
        """Close the buffered segment; False (nothing queued) if it is only whitespace."""
        text = "".join(self.buffer)
        if not text.strip():
            return False
        if early:
            logger.debug(
                "kitta %s: flushing early to keep the segment under %d characters",
                self.label,
                self.limits.max_segment_chars,
            )
        self.segments.add(text)
        self.frames.append(("flush", encode(FlushEvent())))
        self.buffer.clear()
        self.buffer_chars = 0
        return True

    def stop(self) -> None:
        text = "".join(self.buffer)
        if text.strip():
            self.segments.add(text)
        self.buffer.clear()
        self.buffer_chars = 0
        self.stop_requested = True
        self.frames.append(("stop", encode(StopEvent())))

    def unsent(self) -> tuple[tuple[str, ...], str, bool]:
        """Everything whose audio was never delivered: the pending segments' texts, the unflushed buffer, and
        whether ``stop`` was requested (what a retry replays)."""
        return tuple(self.segments.pending()), "".join(self.buffer), self.stop_requested

    def replay(self, segments: tuple[str, ...], buffer: str, stop: bool) -> None:
        """Queue what an earlier attempt left undelivered (see :meth:`unsent`)."""
        for text in segments:
            self.text(text)
            self.flush()
        if buffer:
            self.text(buffer)
        if stop:
            self.stop()
