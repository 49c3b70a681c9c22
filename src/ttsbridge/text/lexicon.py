"""The pronunciation lexicon: words (or regular expressions) -> a respelling, per voice: :class:`Lexicon`.

Both providers take plain text, so a pronunciation is a respelling sent in the word's place (``"Nineninesix"``
-> ``"nine nine six"``, ``"SQL"`` -> ``"sequel"``); the written form (the LLM's word) is what word timing,
heard text and transcripts report. An entry may also carry ``phonemes`` (IPA): a provider that someday takes
phoneme markup gets it through the normalizer's ``phonemes`` hook (``(word, ipa) -> markup``) instead of the
respelling; until then they are kept and unused.

Entries apply to every voice (``voice=None``) or to one voice, whose entries win over the global ones. Words
match whole (not inside a longer or hyphenated word), case-insensitively unless ``case_sensitive``, longest
first; a regex entry is applied as written, and its respelling may name its groups (``\\1``, ``\\g<name>``).
The lexicon can be changed while speaking (:meth:`Lexicon.add`, :meth:`Lexicon.remove`,
:meth:`Lexicon.update`, :meth:`Lexicon.load`): the next text normalized uses the change.

File format (JSON, :meth:`Lexicon.load`): ``{"word": "respelling", ...}``, or
``{"entries": [{"match": "SQL", "say": "sequel"}, {"match": "\\\\bv(\\\\d+)\\\\b", "say": "version \\\\1",
"regex": true}], "voices": {"<voice id>": [{"match": "gif", "say": "jif"}]}}``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.text.spans import Edit

__all__ = ["Lexicon", "Pronunciation"]

#: ``(word as written, its phonemes) -> the text sent``: phoneme markup, for a provider that accepts it.
PhonemeMarkup = Callable[[str, str], str]


@dataclass(frozen=True)
class Pronunciation:
    """One entry: ``match`` (a word, a phrase, or a regex with ``regex=True``) is spoken as ``say``."""

    match: str
    say: str
    regex: bool = False
    case_sensitive: bool = False
    #: None: every voice; else the voice id this entry is for.
    voice: str | None = None
    #: IPA, for a provider that takes phoneme markup (see the module docstring); unused by the respelling.
    phonemes: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.match, str) or not self.match.strip():
            raise TTSInvalidOptionError("match", self.match, "a non-empty word, phrase or regex")
        if not isinstance(self.say, str):
            raise TTSInvalidOptionError("say", self.say, "the respelling (a string)")
        if self.voice is not None and not isinstance(self.voice, str):
            raise TTSInvalidOptionError("voice", self.voice, "a voice id or None")
        if self.regex:
            try:
                re.compile(self.match)
            except re.error as exc:
                raise TTSInvalidOptionError(
                    "match", self.match, f"a valid regular expression ({exc})"
                ) from None

    @classmethod
    def of(cls, value: Pronunciation | Mapping[str, Any], voice: str | None = None) -> Pronunciation:
        if isinstance(value, Pronunciation):
            return value
        if not isinstance(value, Mapping):
            raise TTSInvalidOptionError("entry", value, "a Pronunciation or a mapping with 'match' and 'say'")
        fields = dict(value)
        unknown = set(fields) - {"match", "say", "regex", "case_sensitive", "voice", "phonemes"}
        if unknown:
            raise TTSInvalidOptionError(
                "entry", sorted(unknown)[0], "match, say, regex, case_sensitive, voice, phonemes"
            )
        if "match" not in fields or "say" not in fields:
            raise TTSInvalidOptionError("entry", value, "a mapping with 'match' and 'say'")
        if voice is not None:
            fields.setdefault("voice", voice)
        return cls(**fields)


class _Compiled:
    """The entries of one voice, compiled: one alternation per case mode for words, then the regexes."""

    def __init__(self, entries: list[Pronunciation]) -> None:
        self.words: dict[str, Pronunciation] = {}  # lower-cased unless case-sensitive
        self.exact: dict[str, Pronunciation] = {}
        self.regexes: list[tuple[re.Pattern[str], Pronunciation]] = []
        for e in entries:  # the voice's own first: the first entry for a word wins
            if e.regex:
                self.regexes.append((re.compile(e.match, 0 if e.case_sensitive else re.IGNORECASE), e))
            elif e.case_sensitive:
                self.exact.setdefault(e.match, e)
            else:
                self.words.setdefault(e.match.lower(), e)
        self.patterns: list[tuple[re.Pattern[str], Callable[[str], Pronunciation | None]]] = []
        if self.exact:
            self.patterns.append((_alternation(self.exact, 0), self.exact.get))
        if self.words:
            self.patterns.append(
                (_alternation(self.words, re.IGNORECASE), lambda w: self.words.get(w.lower()))
            )

    def edits(self, text: str, markup: PhonemeMarkup | None) -> Iterator[Edit]:
        for pattern, find in self.patterns:
            for m in pattern.finditer(text):
                entry = find(m.group())
                if entry is not None:
                    yield Edit(m.start(), m.end(), _say(entry, m.group(), entry.say, markup), "lexicon")
        for pattern, entry in self.regexes:
            for m in pattern.finditer(text):
                if m.end() > m.start():
                    yield Edit(
                        m.start(), m.end(), _say(entry, m.group(), m.expand(entry.say), markup), "lexicon"
                    )


def _say(entry: Pronunciation, written: str, respelling: str, markup: PhonemeMarkup | None) -> str:
    if markup is not None and entry.phonemes:
        return markup(written, entry.phonemes)
    return respelling


def _alternation(words: Mapping[str, Any], flags: int) -> re.Pattern[str]:
    alts = "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True))
    return re.compile(r"(?<![\w-])(?:" + alts + r")(?![\w-])", flags)


class Lexicon:
    """Pronunciations by word or regex, global or per voice; changed at run time (see the module docstring)."""

    def __init__(self, entries: Iterable[Pronunciation | Mapping[str, Any]] | Mapping[str, str] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: list[Pronunciation] = []
        self._compiled: dict[str | None, _Compiled] = {}
        self.update(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Lexicon({len(self._entries)} entries)"

    @property
    def entries(self) -> list[Pronunciation]:
        return list(self._entries)

    # -- changes (each takes effect for the next text normalized)

    def add(
        self,
        match: str,
        say: str,
        *,
        voice: str | None = None,
        regex: bool = False,
        case_sensitive: bool = False,
        phonemes: str | None = None,
    ) -> Pronunciation:
        """Add (or replace: same ``match`` and ``voice``) one entry."""
        entry = Pronunciation(match, say, regex, case_sensitive, voice, phonemes)
        self.update([entry])
        return entry

    def remove(self, match: str, *, voice: str | None = None) -> bool:
        """Remove the entry for ``match`` (and ``voice``); False when there was none."""
        with self._lock:
            kept = [e for e in self._entries if not (e.match == match and e.voice == voice)]
            found = len(kept) != len(self._entries)
            self._set(kept)
        return found

    def update(self, entries: Iterable[Pronunciation | Mapping[str, Any]] | Mapping[str, str]) -> None:
        """Add entries (a ``{word: respelling}`` mapping, or entries); an entry replaces one with the same
        ``match`` and ``voice``."""
        new = _parse(entries)
        with self._lock:
            keys = {(e.match, e.voice) for e in new}
            self._set([e for e in self._entries if (e.match, e.voice) not in keys] + new)

    def clear(self) -> None:
        with self._lock:
            self._set([])

    def load(self, path: str | os.PathLike[str], *, replace: bool = False) -> None:
        """Add the entries of a JSON file (see the module docstring); ``replace``: instead of the current ones."""
        with open(path, encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as exc:
                raise TTSInvalidOptionError("lexicon file", str(path), f"JSON ({exc})") from None
        entries = _from_document(data)
        if replace:
            self.clear()
        self.update(entries)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Lexicon:
        lexicon = cls()
        lexicon.load(path)
        return lexicon

    def _set(self, entries: list[Pronunciation]) -> None:
        self._entries = entries
        self._compiled = {}  # (a new dict: a reader holding the old one finishes with the old entries)

    # -- matching

    def edits(
        self, text: str, voice: str | None = None, markup: PhonemeMarkup | None = None
    ) -> Iterator[Edit]:
        """The rewrites of ``text`` for ``voice`` (its own entries first, then the global ones)."""
        if not self._entries:
            return iter(())
        compiled = self._compiled
        c = compiled.get(voice)
        if c is None:
            entries = self._entries
            mine = [e for e in entries if voice is not None and e.voice == voice]
            c = compiled[voice] = _Compiled(mine + [e for e in entries if e.voice is None])
        return c.edits(text, markup)


def _parse(entries: Iterable[Pronunciation | Mapping[str, Any]] | Mapping[str, str]) -> list[Pronunciation]:
    if isinstance(entries, Mapping):
        return [Pronunciation(str(k), v) for k, v in entries.items()]
    return [Pronunciation.of(e) for e in entries]


def _from_document(data: Any) -> list[Pronunciation]:
    if not isinstance(data, Mapping):
        raise TTSInvalidOptionError("lexicon file", type(data).__name__, "a JSON object")
    if "entries" not in data and "voices" not in data:
        return _parse(data)
    out = [Pronunciation.of(e) for e in data.get("entries", [])]
    voices = data.get("voices", {})
    if not isinstance(voices, Mapping):
        raise TTSInvalidOptionError("voices", voices, "an object of voice id -> entries")
    for voice, items in voices.items():
        if isinstance(items, Mapping):
            out += [Pronunciation(str(k), v, voice=voice) for k, v in items.items()]
        else:
            out += [Pronunciation.of(e, voice=voice) for e in items]
    return out
