"""Text for voice: the spoken form of an LLM's text, with the map back to its own words (docs/text.md).

:class:`TextNormalizer` rewrites what a voice would misread (numbers, money, phone numbers, emails and URLs,
dates and times, units, acronyms; markdown and emoji out, curly quotes folded; a pronunciation
:class:`Lexicon`) into a :class:`Normalized`: the :class:`Span`\\ s that map the LLM's text (``written``) to what
is sent (``spoken``), each rewritten span a whole-word unit. :class:`StreamNormalizer` does it over the pieces
an adapter sends. Importing this package is cheap: the rules and their libraries are imported on first use.

``split_sentences`` (the CLI's sentence splitter) lives here too.
"""

from __future__ import annotations

import re

from ttsbridge.text.lexicon import Lexicon, Pronunciation
from ttsbridge.text.normalizer import DEFAULT_LANGUAGE, TextNormalizer, normalizer_from
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

# A sentence ends at . ! ? … (optionally followed by closing quotes/brackets) and whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, keeping their punctuation; empty pieces are dropped."""
    parts = _SENTENCE_END.split(text.strip())
    return [p.strip() for p in parts if p and p.strip()]
