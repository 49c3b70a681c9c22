"""What the normalizer rewrites: :class:`TextOptions` (every class on by default)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TextOptions"]


@dataclass(frozen=True)
class TextOptions:
    """Which classes of text are rewritten (all by default). Numbers covers cardinals, ordinals, decimals,
    currency, percentages, units, years and ranges; dates covers dates and times."""

    markdown: bool = True
    emoji: bool = True
    quotes: bool = True
    emails: bool = True
    urls: bool = True
    phones: bool = True
    dates: bool = True
    numbers: bool = True
    acronyms: bool = True
    #: Text sent exactly as written, whatever the rules say (a regex; None: none): by default ``[[...]]``
    #: directives (the emulator's in-band faults, docs/emulator.md), which are neither spoken nor billed.
    verbatim: str | None = r"\[\[[^\[\]\n]*\]\]"
