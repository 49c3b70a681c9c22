"""Small text helpers shared by the CLI and the adapters."""

from __future__ import annotations

import re

# A sentence ends at . ! ? … (optionally followed by closing quotes/brackets) and whitespace.
_SENTENCE_END = re.compile(r"(?<=[.!?…。！？])[\"'”’)\]]*\s+")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, keeping their punctuation; empty pieces are dropped."""
    parts = _SENTENCE_END.split(text.strip())
    return [p.strip() for p in parts if p and p.strip()]
