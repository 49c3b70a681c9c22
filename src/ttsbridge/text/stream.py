"""Normalizing the pieces an adapter sends, as they come: :class:`StreamNormalizer`. Pure.

The adapters send sentences (Pipecat's SENTENCE mode, LiveKit's tokenizer) or clauses (TOKEN mode through
:class:`~ttsbridge.policy.coalesce.TokenCoalescer`); each piece is normalized on its own and goes out at once.
Text is held back only where a piece may end inside something a rule reads whole, so that no rewritten span
is ever split across two requests:

* a piece that does not end in whitespace ends inside a word: that word is held unless it is a plain word
  ("Hel" may become "Hello", which no rule rewrites, but "$1," may become "$1,234" and "AP" "APIs");
* a piece that ends in whitespace after a number-like word without closing punctuation (a clause cut at its
  length limit, in the middle of "+1 415 555 0134") holds that run of number-like words.

A piece that ends a sentence or a clause (``. `` ``, `` ``! ``...) is never held, nor is a piece the adapter
knows is whole (a sentence its framework's aggregator released: ``push(text, whole=True)``): the first
sentence never waits. :meth:`StreamNormalizer.flush` (the end of the turn) releases the rest.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from ttsbridge.text.spans import Normalized

__all__ = ["StreamNormalizer", "complete_until"]


@functools.cache
def _patterns() -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """(compiled on first use: the adapters import this module)"""
    return (
        # a word that no rule would read otherwise if more letters followed it
        re.compile(r"(?:[^\W\d_](?:[^\W\d_]|['\-](?=[^\W\d_]))*)?[.,!?;:…\"')\]]*"),
        # an all-capitals word (an acronym that may go on: "AP" + "Is")
        re.compile(r"[A-Z]{2,}"),
        # a word that may be part of a number read whole with what follows: "+1", "(415)", "555", "$5", "12/05"
        re.compile(r"[-+−(\[$€£¥₹#]*\(?\d[\d.,:/()\-–]*\)?|[$€£¥₹]|[A-Z]{3}"),
    )


#: What closes a clause: a piece ending in it (and whitespace) is complete.
_CLOSING = ".!?;:,…\"')]»”’"


def complete_until(text: str) -> int:
    """How much of ``text`` can be normalized now (the rest may go on in the next piece)."""
    if not text:
        return 0
    plain, caps, numberish = _patterns()
    end = len(text)
    if not text[-1].isspace():
        cut = _last_space(text) + 1
        tail = text[cut:]
        if plain.fullmatch(tail) and not caps.search(tail):
            return end
        return _numberish_before(text, cut)
    body = text.rstrip()
    if not body:
        return end
    cut = _last_space(body) + 1
    last = body[cut:]
    if last[-1] in _CLOSING or not numberish.fullmatch(last):
        return end
    return _numberish_before(text, cut)


def _last_space(text: str) -> int:
    i = len(text) - 1
    while i >= 0 and not text[i].isspace():
        i -= 1
    return i


def _numberish_before(text: str, cut: int) -> int:
    """Move ``cut`` (a word start) back over the number-like words before it ("+1 (415) 555 " + "0134"), and
    one short word before those, which a rule may read with them ("May 5", "by 12/05", "USD 12")."""
    numberish = _patterns()[2]
    held_number = numberish.fullmatch(text[cut:].split(None, 1)[0]) if text[cut:].strip() else None
    while cut > 0:
        body = text[:cut].rstrip()
        start = _last_space(body) + 1
        word = body[start:]
        if not word or word[-1] in _CLOSING:
            break
        if not numberish.fullmatch(word):
            if held_number and word.isalpha() and len(word) <= 9:
                cut = start
            break
        held_number = True
        cut = start
    return cut


class StreamNormalizer:
    """One turn's normalizer over its pieces (see the module docstring). ``normalize`` None: text goes out
    as it is (normalization off), nothing held."""

    def __init__(self, normalize: Callable[[str], Normalized] | None) -> None:
        self._normalize = normalize
        self._held = ""

    @property
    def enabled(self) -> bool:
        return self._normalize is not None

    @property
    def held(self) -> str:
        """Text waiting for the next piece."""
        return self._held

    def push(self, text: str, *, whole: bool = False) -> Normalized:
        """A piece of the LLM's text: the part that is complete, normalized (may be empty). ``whole``: the
        piece is known to end a unit (a sentence the framework's aggregator released), nothing is held."""
        if self._normalize is None:
            return Normalized.plain(text)
        buf = self._held + text
        cut = len(buf) if whole else complete_until(buf)
        self._held = buf[cut:]
        return self._normalize(buf[:cut]) if cut else Normalized()

    def flush(self) -> Normalized:
        """The end of the turn: whatever was held, normalized."""
        buf, self._held = self._held, ""
        if not buf:
            return Normalized()
        return self._normalize(buf) if self._normalize is not None else Normalized.plain(buf)
