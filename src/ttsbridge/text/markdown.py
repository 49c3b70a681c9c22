"""Markdown out of the spoken form, kept in the written one: :func:`markdown_edits`. Pure.

``markdown-it-py`` (CommonMark, with GFM tables and strikethrough) parses the text; its tokens say what is
markup. Block markers are found on the lines the tokens name (headings' ``#``, bullets, ``>``, fences,
rules, table pipes); inline markup (emphasis, code spans, links, images, inline HTML, escapes, entities) by
walking each inline token's children over the source. Every piece of markup becomes an
:class:`~ttsbridge.text.spans.Edit` (a deletion, or a link's URL dropped and its label kept), so the written
form keeps the LLM's markdown and the map stays exact.

Streamed text is cut into sentences and clauses, so emphasis may open in one piece and close in the next:
markers the parser leaves as text at a word's edge (``"**very"``, ``"important**"``) are dropped too. If the
walk ever loses its place in the source, a conservative fallback drops only markers at word edges and line
starts.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from ttsbridge.text.spans import Edit

__all__ = ["markdown_edits"]

#: Worth parsing: inline markers, or a block marker at a line start.
_MAYBE = re.compile(r"[*_`~\[\]<>|\\&]|^\s{0,3}(?:#{1,6}\s|[-+]\s|(?:-{3,}|={3,}|\*{3,})\s*$)", re.MULTILINE)
#: Emphasis, strikethrough or code markers left as text at a word's edge (unclosed across pieces).
_STRAY = re.compile(r"(?<!\S)(?:\*{1,3}|_{1,3}|~~|`+)(?=\S)|(?<=\S)(?:\*{1,3}|_{1,3}|~~|`+)(?!\S)")
_LINE_MARKERS = re.compile(r"^[ \t]{0,3}(?:#{1,6}[ \t]+|[-*+][ \t]+|>[ \t]?)", re.MULTILINE)
_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")

_parser: Any = None


def _md() -> Any:
    global _parser
    if _parser is None:
        from markdown_it import MarkdownIt

        _parser = MarkdownIt("commonmark", {"html": True}).enable(["strikethrough", "table"])
    return _parser


class _Lost(Exception):
    """The walk lost its place in the source."""


def markdown_edits(text: str) -> Iterator[Edit]:
    """The markup of ``text`` as edits (see the module docstring)."""
    if not _MAYBE.search(text):
        return iter(())
    try:
        return iter(_Walk(text).run())
    except _Lost:
        return iter(_fallback(text))


def _fallback(text: str) -> list[Edit]:
    edits = [
        Edit(m.start(), m.end(), "", "markdown") for m in _LINE_MARKERS.finditer(text) if m.group().strip()
    ]
    taken = {(e.start, e.end) for e in edits}
    for m in _STRAY.finditer(text):
        if not any(s < m.end() and m.start() < e for s, e in taken):
            edits.append(Edit(m.start(), m.end(), "", "markdown"))
    return edits


class _Walk:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.edits: dict[int, Edit] = {}  # by start (block markers may be found twice: nested quotes)
        self.skip: set[int] = set()  # source positions deleted
        self.block_skip: set[int] = set()  # source positions of block markers (in no inline content)
        self.loose = False  # in a table cell: the whitespace around the pipes is no cell's

    # -- helpers

    def line(self, n: int) -> tuple[int, int]:
        """``[start, end)`` of line ``n`` (without its newline)."""
        start = self.starts[n] if n < len(self.starts) else len(self.text)
        end = self.text.find("\n", start)
        return start, len(self.text) if end < 0 else end

    def delete(self, start: int, end: int, spoken: str = "") -> None:
        if end > start and start not in self.edits:
            self.edits[start] = Edit(start, end, spoken, "markdown")
            self.skip.update(range(start, end))

    def marker(self, n: int, pattern: str, group: int = 1, *, keep: bool = False) -> None:
        """On line ``n``, the marker ``pattern`` matches (its ``group`` is deleted, or only skipped)."""
        start, end = self.line(n)
        m = re.compile(pattern).match(self.text, start, end)
        if m and m.group(group):
            self.block_skip.update(range(m.start(group), m.end(group)))
            if not keep:
                self.delete(m.start(group), m.end(group))

    # -- the walk

    def run(self) -> list[Edit]:
        tokens = _md().parse(self.text)
        for tok in tokens:
            self.block(tok)
        cell = False
        for tok in tokens:
            cell = tok.type in ("th_open", "td_open") or (cell and tok.type == "inline")
            if tok.type == "inline" and tok.map:
                self.loose = cell
                self.inline(tok)
        return sorted(self.edits.values(), key=lambda e: e.start)

    def block(self, tok: Any) -> None:
        m = tok.map
        if m is None:
            return
        quote = r"[ \t]*(?:>[ \t]?)*[ \t]*"  # (matched at the line's start)
        if tok.type == "heading_open":
            if tok.markup.startswith("#"):
                self.marker(m[0], quote + r"(#{1,6}(?:[ \t]+|$))")
                start, end = self.line(m[0])
                closing = re.compile(r"[ \t]+#+[ \t]*$").search(self.text, start, end)
                if closing:
                    self.delete(closing.start(), closing.end())
            else:  # setext: the underline
                self.marker(m[1] - 1, quote + r"([=-]+[ \t]*)$")
        elif tok.type == "list_item_open":
            if tok.markup in ("-", "*", "+"):
                self.marker(m[0], quote + r"([-*+](?:[ \t]+|$))")
            else:
                self.marker(m[0], quote + r"(\d{1,9}[.)][ \t]*)", keep=True)
        elif tok.type == "blockquote_open":
            for n in range(m[0], m[1]):
                self.marker(n, r"([ \t]*(?:>[ \t]?)+)")
        elif tok.type == "fence":
            self.marker(m[0], r"([ \t]*(?:>[ \t]?)*[ \t]*(?:`{3,}|~{3,}).*)$")
            if m[1] - 1 > m[0]:
                self.marker(m[1] - 1, r"([ \t]*(?:>[ \t]?)*[ \t]*(?:`{3,}|~{3,})[ \t]*)$")
        elif tok.type == "hr" or tok.type == "html_block":
            for n in range(m[0], m[1]):
                start, end = self.line(n)
                self.delete(start, end)
                self.block_skip.update(range(start, end))
        elif tok.type == "tr_open":
            start, end = self.line(m[0])
            for p in range(start, end):
                if self.text[p] == "|" and (p == 0 or self.text[p - 1] != "\\"):
                    inner = self.text[start:p].strip() and self.text[p + 1 : end].strip()
                    self.delete(p, p + 1, "," if inner else "")
                    self.block_skip.add(p)
        elif tok.type == "thead_open":
            start, end = self.line(m[1])  # the delimiter row under the header
            if re.fullmatch(r"[ \t|:\-]+", self.text[start:end] or "x"):
                self.delete(start, end)
                self.block_skip.update(range(start, end))

    def inline(self, tok: Any) -> None:
        self.pos = max(self.pos, self.line(tok.map[0])[0])
        self.children(tok.children or [])

    def children(self, children: list[Any]) -> None:
        for child in children:
            kind = child.type
            if kind == "text":
                self.match_text(child.content)
            elif kind in ("strong_open", "strong_close", "em_open", "em_close", "s_open", "s_close"):
                self.expect(child.markup, delete=True)
            elif kind == "softbreak":
                self.expect("\n")
            elif kind == "hardbreak":
                self.hardbreak()
            elif kind == "code_inline":
                self.code(child)
            elif kind == "html_inline":
                self.expect(child.content, delete=True)
            elif kind == "link_open":
                self.expect("<" if child.markup == "autolink" else "[", delete=True)
            elif kind == "link_close":
                if child.markup == "autolink":
                    self.expect(">", delete=True)
                else:
                    self.link_tail()
            elif kind == "image":
                self.expect("![", delete=True)
                self.children(child.children or [])
                self.link_tail()
            else:
                raise _Lost(kind)

    def advance_to_content(self) -> None:
        """Skip what no inline content holds: block markers, and a line's indentation (in a table cell, the
        whitespace around the pipes)."""
        text, n, blocks = self.text, len(self.text), self.block_skip
        start = text.rfind("\n", 0, self.pos) + 1
        prefix = self.loose or all(text[k] in " \t" or k in blocks for k in range(start, self.pos))
        while self.pos < n:
            if self.pos in blocks:
                self.pos += 1
                prefix = True
            elif prefix and text[self.pos] in " \t":
                self.pos += 1
            else:
                break

    def expect(self, s: str, *, delete: bool = False) -> None:
        self.advance_to_content()
        if not s:
            return
        if not self.text.startswith(s, self.pos):
            raise _Lost(s)
        if delete:
            self.delete(self.pos, self.pos + len(s))
        self.pos += len(s)

    def hardbreak(self) -> None:
        self.advance_to_content()
        m = re.compile(r"(\\|[ \t]{2,})\n").match(self.text, self.pos)
        if not m:
            raise _Lost("hardbreak")
        if m.group(1) == "\\":
            self.delete(self.pos, self.pos + 1)
        self.pos = m.end()

    def code(self, child: Any) -> None:
        self.advance_to_content()
        fence = child.markup
        if not self.text.startswith(fence, self.pos):
            raise _Lost(fence)
        close = self.text.find(fence, self.pos + len(fence))
        if close < 0:
            raise _Lost(fence)
        inner = self.text[self.pos + len(fence) : close]
        pad = 1 if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else 0
        self.delete(self.pos, self.pos + len(fence) + pad)
        self.delete(close - pad, close + len(fence))
        self.pos = close + len(fence)

    def link_tail(self) -> None:
        """After a link's label: ``](url "title")``, ``][ref]`` or ``]`` — deleted."""
        self.advance_to_content()
        text, start = self.text, self.pos
        if not text.startswith("]", start):
            raise _Lost("]")
        end = start + 1
        if text.startswith("(", end):
            depth, end = 0, end
            while end < len(text):
                c = text[end]
                if c == "\\":
                    end += 2
                    continue
                depth += c == "("
                depth -= c == ")"
                end += 1
                if depth == 0:
                    break
        elif text.startswith("[", end):
            close = text.find("]", end)
            end = len(text) if close < 0 else close + 1
        self.delete(start, end)
        self.pos = end

    def match_text(self, content: str) -> None:
        """Walk ``content`` (a text token: escapes and entities decoded) over the source; escapes' backslashes
        are deleted, entities replaced by what they stand for, stray emphasis markers deleted."""
        self.advance_to_content()
        text, n = self.text, len(self.text)
        start = i = self.pos
        j = 0
        while j < len(content):
            if i >= n:
                raise _Lost(content)
            c = content[j]
            if (
                text[i] == "&"
                and (m := _ENTITY.match(text, i))
                and content.startswith(html.unescape(m.group()), j)
            ):
                decoded = html.unescape(m.group())
                self.delete(i, m.end(), decoded)
                i = m.end()
                j += len(decoded)
            elif text[i] == c:
                i += 1
                j += 1
                if c == "\n":
                    self.pos = i
                    self.advance_to_content()
                    i = self.pos
            elif text[i] == "\\" and text.startswith(c, i + 1):
                self.delete(i, i + 1)
                i += 2
                j += 1
            elif i in self.block_skip:
                i += 1
            else:
                raise _Lost(content)
        self.pos = i
        for m in _STRAY.finditer(text, start, i):
            if not any(p in self.edits for p in range(m.start(), m.end())):
                self.delete(m.start(), m.end())
