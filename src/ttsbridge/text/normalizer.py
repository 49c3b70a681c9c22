"""The voice normalizer: :class:`TextNormalizer` (the LLM's text -> what a voice should be sent, with the map).

Cheap to build and to import: the rules (and ``num2words``, ``babel``, ``phonenumbers``, ``markdown-it-py``)
are imported on the first text that needs them, or by :meth:`TextNormalizer.warm` ahead of time. A text with
nothing to rewrite (no digit, symbol, markup, capitals run, curly quote or emoji, and no lexicon entry) is
returned as it is without running any rule.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.text.lexicon import Lexicon, PhonemeMarkup
from ttsbridge.text.options import TextOptions
from ttsbridge.text.spans import Edit, Normalized, spans_from_edits
from ttsbridge.text.stream import StreamNormalizer

if TYPE_CHECKING:
    from ttsbridge.text.rules import Rules

__all__ = ["DEFAULT_LANGUAGE", "TextNormalizer"]

#: The language when neither the normalizer nor the turn names one.
DEFAULT_LANGUAGE = "en"

#: Anything a rule could rewrite (the fast path skips the rules when nothing matches).
_MAY_REWRITE = re.compile(
    r"[\d@#&*_`~\[\]<>|\\%$¢£¤¥₠-₿‘’‚‛′“”„‟″\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d]"
    r"|[\U0001f000-\U0001faff]|[A-Z]{2}|[a-z]\.[a-z]|^\s*[-+>]\s|^\s*[=-]{3,}",
    re.MULTILINE,
)


class TextNormalizer:
    """Rewrites an LLM's text into what a voice should read, keeping the map back to the LLM's own words.

    Args:
        language: the language of the text (a BCP-47 tag: ``"en"``, ``"en-GB"``, ``"es"``, ``"es-MX"``).
            None: the turn's language (the provider's ``language`` option), else English. Languages other than
            English and Spanish get the language-neutral rules only (markdown, emoji, quotes, the lexicon).
        lexicon: pronunciations (:class:`~ttsbridge.text.Lexicon`; changed at run time, per voice).
        options: which classes are rewritten (:class:`~ttsbridge.text.TextOptions`, all by default).
        phonemes: ``(word, ipa) -> text``: phoneme markup for lexicon entries that carry ``phonemes``, for a
            provider that accepts it (neither does today: leave it None and the respelling is sent).
    """

    def __init__(
        self,
        *,
        language: str | None = None,
        lexicon: Lexicon | None = None,
        options: TextOptions | None = None,
        phonemes: PhonemeMarkup | None = None,
    ) -> None:
        if language is not None and (not isinstance(language, str) or not language.strip()):
            raise TTSInvalidOptionError("language", language, "a BCP-47 tag such as 'en' or 'es-MX', or None")
        if lexicon is not None and not isinstance(lexicon, Lexicon):
            raise TTSInvalidOptionError("lexicon", lexicon, "a ttsbridge.text.Lexicon or None")
        if options is not None and not isinstance(options, TextOptions):
            raise TTSInvalidOptionError("options", options, "a ttsbridge.text.TextOptions or None")
        self.language = language
        self.lexicon = lexicon if lexicon is not None else Lexicon()
        self.options = options if options is not None else TextOptions()
        self.phonemes = phonemes

    def __repr__(self) -> str:
        return f"TextNormalizer(language={self.language!r}, lexicon={self.lexicon!r})"

    def language_for(self, language: str | None = None) -> str:
        """The language a text is normalized in: this normalizer's, else ``language`` (the turn's), else
        English."""
        return self.language or language or DEFAULT_LANGUAGE

    def normalize(self, text: str, *, voice: str | None = None, language: str | None = None) -> Normalized:
        """``text`` in its written and spoken forms, with the map (whole words rewritten as units)."""
        if not text:
            return Normalized()
        lexicon = self.lexicon
        first: list[Edit] = list(lexicon.edits(text, voice, self.phonemes)) if len(lexicon) else []
        if not first and not _MAY_REWRITE.search(text):
            return Normalized.plain(text)  # nothing any rule could rewrite: no rule runs
        rules = _rules(self.language_for(language), self.options)
        return spans_from_edits(text, rules.edits(text, iter(first) if first else None))

    def stream(self, *, voice: str | None = None, language: str | None = None) -> StreamNormalizer:
        """A :class:`~ttsbridge.text.StreamNormalizer` for one turn's pieces (see there)."""
        return StreamNormalizer(functools.partial(self.normalize, voice=voice, language=language))

    def warm(self, language: str | None = None) -> None:
        """Import and build what the first text of ``language`` will need, now (not on the first sentence)."""
        rules = _rules(self.language_for(language), self.options)
        rules.edits(
            "On 12/05/2025 at 3:30 pm, **pay** $1,234.50 (5%) for 2 km: call +1 (415) 555-0134, a@b.io."
        )


@functools.lru_cache(maxsize=16)
def _rules(language: str, options: TextOptions) -> Rules:
    from ttsbridge.text.lang import speech_for
    from ttsbridge.text.rules import Rules

    return Rules(speech_for(language), options)
