"""Text for voice: the spoken form of an LLM's text, with the map back to its own words (docs/text.md).

:class:`TextNormalizer` rewrites what a voice would misread (numbers, money, phone numbers, emails and URLs,
dates and times, units, acronyms; markdown and emoji out, curly quotes folded; a pronunciation
:class:`Lexicon`) into a :class:`Normalized`: the :class:`Span`\\ s that map the LLM's text (``written``) to what
is sent (``spoken``), each rewritten span a whole-word unit. :class:`StreamNormalizer` does it over the pieces
an adapter sends.

Importing this package costs next to nothing (the framework adapters import it): its names are loaded on
first use, and the rules and their libraries (``num2words``, ``babel``, ``phonenumbers``, ``markdown-it-py``)
on the first text that needs them. ``split_sentences`` (the CLI's sentence splitter) lives here too.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ttsbridge.text.lexicon import Lexicon, Pronunciation
    from ttsbridge.text.normalizer import DEFAULT_LANGUAGE, TextNormalizer
    from ttsbridge.text.options import TextOptions
    from ttsbridge.text.spans import Normalized, Span
    from ttsbridge.text.stream import StreamNormalizer

__all__ = [
    "DEFAULT_LANGUAGE",
    "Lexicon",
    "Normalized",
    "Pronunciation",
    "Span",
    "StreamNormalizer",
    "TextNormalizer",
    "TextOptions",
    "normalizer_from",
    "split_sentences",
]

_LAZY = {
    "DEFAULT_LANGUAGE": "normalizer",
    "Lexicon": "lexicon",
    "Normalized": "spans",
    "Pronunciation": "lexicon",
    "Span": "spans",
    "StreamNormalizer": "stream",
    "TextNormalizer": "normalizer",
    "TextOptions": "options",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def normalizer_from(value: Any) -> TextNormalizer | None:
    """An adapter's ``normalize_text`` argument as a normalizer: True (the default one), False (None: off), or
    a :class:`TextNormalizer`."""
    from ttsbridge.errors import TTSInvalidOptionError
    from ttsbridge.text.normalizer import TextNormalizer

    if value is False or value is None:
        return None
    if value is not True and not isinstance(value, TextNormalizer):
        raise TTSInvalidOptionError("normalize_text", value, "True, False or a ttsbridge.text.TextNormalizer")
    missing = [m for m in _LIBRARIES if importlib.util.find_spec(m) is None]
    if missing:
        raise TTSInvalidOptionError(
            "normalize_text",
            value,
            "False, or the libraries the normalizer needs: pip install 'ttsbridge[text]'",
            hint=f"missing: {', '.join(missing)}",
        )
    return TextNormalizer() if value is True else value


#: What the rules import (on first use): the ``text`` extra.
_LIBRARIES = ("num2words", "babel", "phonenumbers", "markdown_it")


# A sentence ends at . ! ? … (optionally followed by closing quotes/brackets) and whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, keeping their punctuation; empty pieces are dropped."""
    parts = _SENTENCE_END.split(text.strip())
    return [p.strip() for p in parts if p and p.strip()]
