"""Streamed LLM tokens, coalesced into clauses before they are sent to a provider.

Both providers render every send as a unit of its own (a Nineninesix transcript is rendered, trimmed and
billed on its own; a flushed Kitta segment likewise): sending "Hel" and "lo" apart would speak two fragments.
:class:`TokenCoalescer` holds tokens until a clause ends, or until ``max_chars`` pile up (then cut at the last
word boundary). Pure: no clock, no I/O.

A clause ends after ``. ! ? ; : , …`` or a newline followed by whitespace (so "3.14" and "e.g" stay whole),
and right after a full-width mark (``。！？；：，、…``), which needs no space after it: Chinese and Japanese
text has none. Over ``max_chars`` without a clause end, the cut is at the last whitespace, or after the last
character of a script written without spaces.
"""

from __future__ import annotations

from ttsbridge.policy.words import is_unspaced

__all__ = ["TokenCoalescer"]

#: Clause ends that count when whitespace follows them.
_CLAUSE_END = ".!?;:,…\n"
#: Full-width clause ends (CJK): a clause ends right after them.
_CJK_CLAUSE_END = "。！？；：，、"


class TokenCoalescer:
    """Holds streamed tokens until a clause ends (or ``max_chars`` pile up, cut at a word boundary)."""

    def __init__(self, max_chars: int = 80) -> None:
        if max_chars < 1:
            raise ValueError(f"max_chars must be at least 1, got {max_chars!r}")
        self._buf = ""
        self._max = max_chars

    @property
    def buffered(self) -> str:
        """Text held back so far."""
        return self._buf

    def push(self, text: str) -> str:
        """Add a token; return the text ready to send (possibly empty)."""
        self._buf += text
        cut = self._clause_cut()
        if cut < 0 and len(self._buf) >= self._max:
            cut = self._word_cut()
        if cut <= 0:
            return ""
        out, self._buf = self._buf[:cut], self._buf[cut:]
        return out

    def flush(self) -> str:
        """The end of the text: return everything held."""
        out, self._buf = self._buf, ""
        return out

    def _clause_cut(self) -> int:
        buf = self._buf
        for i in range(len(buf) - 1, -1, -1):
            if buf[i] in _CJK_CLAUSE_END:
                return i + 2 if i + 1 < len(buf) and buf[i + 1].isspace() else i + 1
            if buf[i] in _CLAUSE_END and i + 1 < len(buf) and buf[i + 1].isspace():
                return i + 2
        return -1

    def _word_cut(self) -> int:
        buf = self._buf
        space = max(buf.rfind(" "), buf.rfind("\n"))
        if space > 0:
            return space + 1
        for i in range(len(buf) - 1, 0, -1):
            if is_unspaced(buf[i - 1]):
                return i
        return -1
