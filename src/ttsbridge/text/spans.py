"""The map between the LLM's text and the spoken text: :class:`Span`, :class:`Normalized`. Pure.

A normalized text is a list of spans laid end to end. Each span pairs a piece of the LLM's text (``written``)
with what is sent to the provider in its place (``spoken``). Most spans are unchanged (``written ==
spoken``); a *rewritten* span always covers whole words of the written text (from a whitespace, or the start,
to a whitespace, or the end): ``"$1,234.50"`` -> ``"one thousand two hundred thirty-four dollars and fifty
cents"``, ``"**bold**"`` -> ``"bold"``, ``"🎉"`` -> ``""``. So a rewritten span is a unit of its own: it is heard
whole or not at all, and any prefix of the written text that ends between spans ends on a word boundary.

The rules that find rewrites (:mod:`ttsbridge.text.rules`) return :class:`Edit`\\ s on the written text;
:func:`spans_from_edits` widens them to whole words and cuts the text into spans, so the map is exact by
construction: nothing is diffed after the fact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["TEXT", "Edit", "Normalized", "Span", "spans_from_edits"]

#: The kind of an unchanged span.
TEXT = "text"


class Span:
    """A piece of the LLM's text (``written``) and what is sent in its place (``spoken``); ``kind`` names the
    rule that rewrote it (``"currency"``, ``"phone"``, ``"markdown"``...; :data:`TEXT` when unchanged).
    (A plain class, not a dataclass: the adapters import this module, and it costs nothing to import.)"""

    __slots__ = ("kind", "spoken", "written")

    def __init__(self, written: str, spoken: str, kind: str = TEXT) -> None:
        self.written = written
        self.spoken = spoken
        self.kind = kind

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Span)
            and other.written == self.written
            and other.spoken == self.spoken
            and other.kind == self.kind
        )

    def __hash__(self) -> int:
        return hash((self.written, self.spoken, self.kind))

    def __repr__(self) -> str:
        return f"Span({self.written!r}, {self.spoken!r}, {self.kind!r})"

    @property
    def rewritten(self) -> bool:
        """True when the spoken form differs: then the span is one unit, heard whole or not at all."""
        return self.written != self.spoken


class Edit:
    """One rewrite a rule found: ``written[start:end]`` is spoken as ``spoken``."""

    __slots__ = ("end", "kind", "spoken", "start")

    def __init__(self, start: int, end: int, spoken: str, kind: str) -> None:
        self.start = start
        self.end = end
        self.spoken = spoken
        self.kind = kind

    def __repr__(self) -> str:
        return f"Edit({self.start}, {self.end}, {self.spoken!r}, {self.kind!r})"


class Normalized:
    """A text in its two forms and the map between them (the spans, in order)."""

    __slots__ = ("spans", "spoken", "written")

    def __init__(self, spans: Iterable[Span] = ()) -> None:
        self.spans: tuple[Span, ...] = tuple(spans)
        #: the LLM's text: the spans' ``written`` joined (exactly the input)
        self.written: str = "".join(s.written for s in self.spans)
        #: the text sent to the provider
        self.spoken: str = "".join(s.spoken for s in self.spans)

    @classmethod
    def plain(cls, text: str) -> Normalized:
        """``text`` unchanged (one span, or none for an empty text)."""
        return cls((Span(text, text),) if text else ())

    def __add__(self, other: Normalized) -> Normalized:
        return Normalized(self.spans + other.spans)

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Normalized) and other.spans == self.spans

    def __hash__(self) -> int:
        return hash(self.spans)

    def __repr__(self) -> str:
        return f"Normalized({self.written!r} -> {self.spoken!r})"

    @property
    def rewritten(self) -> bool:
        """True when any span was rewritten."""
        return any(s.rewritten for s in self.spans)

    @property
    def sendable(self) -> str:
        """The spoken text to send: empty when a rewrite left nothing but whitespace (an emoji alone); text
        nothing rewrote goes out as it is."""
        spoken = self.spoken
        return spoken if spoken.strip() or not self.rewritten else ""

    def written_for(self, spoken_chars: int) -> int:
        """How much of the written text the first ``spoken_chars`` characters of the spoken text stand for: an
        unchanged span counts character by character, a rewritten one only once it is all there."""
        done_w = done_s = 0
        for span in self.spans:
            n = len(span.spoken)
            if done_s + n <= spoken_chars:
                done_w += len(span.written)
                done_s += n
                continue
            if not span.rewritten:
                done_w += max(spoken_chars - done_s, 0)
            break
        return done_w

    def spoken_for(self, written_chars: int) -> int:
        """How much of the spoken text the first ``written_chars`` characters of the written text became (a
        rewritten span counts only when it is all there)."""
        done_w = done_s = 0
        for span in self.spans:
            n = len(span.written)
            if done_w + n <= written_chars:
                done_w += n
                done_s += len(span.spoken)
                continue
            if not span.rewritten:
                done_s += max(written_chars - done_w, 0)
            break
        return done_s


def _word_start(text: str, i: int) -> int:
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return i


def _word_end(text: str, i: int) -> int:
    n = len(text)
    while i < n and not text[i].isspace():
        i += 1
    return i


def spans_from_edits(text: str, edits: Sequence[Edit]) -> Normalized:
    """Cut ``text`` into spans: each edit widened to the whole words it touches (edits that then share a word
    become one span); the rest unchanged. ``edits`` must not overlap (any order)."""
    if not edits:
        return Normalized.plain(text)
    ordered = sorted(edits, key=lambda e: e.start)
    spans: list[Span] = []
    pos = 0
    i = 0
    n = len(ordered)
    while i < n:
        first = ordered[i]
        start = _word_start(text, first.start)
        end = _word_end(text, max(first.end, first.start))
        group = [first]
        i += 1
        while i < n and ordered[i].start < end:  # the next edit is in a word of the widened range
            edit = ordered[i]
            group.append(edit)
            end = max(end, _word_end(text, max(edit.end, edit.start)))
            i += 1
        if start > pos:
            spans.append(Span(text[pos:start], text[pos:start]))
        parts: list[str] = []
        at = start
        for edit in group:
            parts.append(text[at : edit.start])
            parts.append(edit.spoken)
            at = edit.end
        parts.append(text[at:end])
        kinds = [e.kind for e in group if e.kind != "markdown"] or [group[0].kind]
        written = text[start:end]
        spoken = "".join(parts)
        spans.append(Span(written, spoken, kinds[0] if spoken != written else TEXT))
        pos = end
    if pos < len(text):
        spans.append(Span(text[pos:], text[pos:]))
    return Normalized(_merge_plain(spans))


def _merge_plain(spans: list[Span]) -> list[Span]:
    """Adjacent unchanged spans joined (an edit that changed nothing leaves one)."""
    out: list[Span] = []
    for span in spans:
        if out and not span.rewritten and not out[-1].rewritten:
            prev = out.pop()
            span = Span(prev.written + span.written, prev.spoken + span.spoken)
        out.append(span)
    return out
