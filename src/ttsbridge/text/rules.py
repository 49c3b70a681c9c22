"""The rules that find what to rewrite, and what each rewrite says: :class:`Rules`. Pure.

Every rule matches the LLM's text as written (never a text another rule already rewrote) and returns
:class:`~ttsbridge.text.spans.Edit`\\ s; rules run in a fixed order and a match that overlaps one taken
before it is dropped, so each character is rewritten at most once and the map stays exact. The order:
markdown, the pronunciation lexicon, emails, URLs, phone numbers, digit groups (codes), dates, ranges,
times, currency, percentages, units, ordinals, years, numbers, acronyms, symbols, quotes, emoji.

Imported on the first text that needs it: it imports ``num2words``, ``babel`` and ``phonenumbers`` (through
:mod:`ttsbridge.text.lang`).
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING

import phonenumbers
from babel.numbers import list_currencies

from ttsbridge.text.lang import MAGNITUDES, Speech
from ttsbridge.text.spans import Edit

if TYPE_CHECKING:
    from ttsbridge.text.options import TextOptions

__all__ = ["Rules"]

NUM = r"\d+(?:[.,]\d+)*"
_MAG = "|".join(sorted(MAGNITUDES, key=len, reverse=True))
_MERIDIEM = r"(?P<mer>[aApP])\.?\s?[mM]\.?(?![\w])"

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_URL = re.compile(
    r"(?<![\w@/.])(?:(?:[hH][tT][tT][pP][sS]?://|[wW]{3}\.)[^\s<>\"']*[^\s<>\"'.,;:!?)\]]"
    r"|[a-zA-Z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.[a-z]{2,6}(?:/[^\s<>\"']*[^\s<>\"'.,;:!?)\]])?(?![\w@]))"
)
_PHONEISH = re.compile(r"[+(]?\d[\d \t().\-–]{5,}\d")
_DIGIT_GROUPS = re.compile(r"(?<![\w.,/+-])\d{2,5}(?:[-.]\d{2,5}){1,5}(?![\w]|[-.]\d)")
_ISO_DATE = re.compile(r"(?<![\w/.-])(?P<y>\d{4})-(?P<a>\d{1,2})-(?P<b>\d{1,2})(?![\w/]|-\d)")
_NUMERIC_DATE = re.compile(
    r"(?<![\w/.,-])(?P<a>\d{1,2})(?P<sep>[/.-])(?P<b>\d{1,2})(?:(?P=sep)(?P<y>\d{4}|\d{2}))?(?![\w/]|[.,-]\d)"
)
_TIME = re.compile(r"(?<![\w:.,])(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?::[0-5]\d)?(?:\s?" + _MERIDIEM + ")?")
_HOUR = re.compile(r"(?<![\w:.,])(?P<h>1[0-2]|0?[1-9])\s?" + _MERIDIEM)
_SIDE = r"(?:[$€£¥₹]\s?)?(?:\d{1,2}:\d{2}|\d+(?:[.,]\d+)*)(?:\s?[aApP]\.?\s?[mM]\.?)?%?"
_RANGE = re.compile(
    r"(?<![\w.,/$€£¥₹:-])(?P<a>" + _SIDE + r")(?:(?P<tight>[-–—])|\s?(?P<dash>[–—])\s?)(?P<b>" + _SIDE + r")"
    r"(?![\w/:]|[.,]\d)"
)
_PERCENT = re.compile(r"(?<![\w.,])(?P<sign>[-−+])?(?P<num>" + NUM + r")\s?%")
_ORDINAL_EN = re.compile(r"(?<![\w.,])(?P<num>\d+)(?P<suf>st|nd|rd|th)\b")
_ORDINAL_ES = re.compile(r"(?<![\w.,])(?P<num>\d+)\.?(?P<suf>º|ª|er|ro|ra|do|da|to|ta)(?![\w])")
_YEAR = re.compile(r"(?<![\w.,$€£¥₹%-])(?P<y>1\d{3}|20\d\d)(?P<s>'?s)?(?![\w%]|[.,:]\d)")
_NUMBER = re.compile(r"(?<![\w.,:/-])(?P<sign>(?<![^\s(\[])[-−+])?(?P<num>" + NUM + r")(?![\w]|[/:]\d)")
_FRACTION = re.compile(r"(?<![\w.,:/-])(?P<n>\d{1,3})/(?P<d>\d{1,2})(?![\w/]|[.,]\d)")
_ACRONYM = re.compile(r"(?<![\w'’&.-])(?P<w>[A-Z]{2,6})(?P<s>s)?(?![\w'’&-]|\.\w)")
#: Three all-capitals words in a row: shouting, not acronyms.
_SHOUTING = re.compile(r"\b[A-Z]{2,}\b\W+\b[A-Z]{2,}\b\W+\b[A-Z]{2,}\b")
_ROMAN = re.compile(r"^(?:X{0,3})(?:IX|IV|V?I{0,3})$")
_AMPERSAND = re.compile(r"(?<=\w)&(?=\w)|(?<=\s)&(?=\s)")
_HASH_NUMBER = re.compile(r"(?<![\w#&])#(?P<num>\d+)\b")
_QUOTES = re.compile(r"[‘’‚‛′“”„‟″]")
_QUOTE_FOLD = {
    "‘": "'",
    "’": "'",
    "‚": "'",
    "‛": "'",
    "′": "'",
    "“": '"',
    "”": '"',
    "„": '"',
    "‟": '"',
    "″": '"',
}
#: Emoji and pictographs, with their joiners, variation selectors, keycap marks and tag characters.
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\U00002600-\U000027bf\U00002b00-\U00002bff\U0001f1e6-\U0001f1ff"
    "\U0000fe0f\U0000200d\U000020e3\U000e0020-\U000e007f\U00002300-\U000023ff]+"
)
_WORDISH = re.compile(r"[A-Za-z]+|\d+|[^A-Za-z\d]")


class _Claims:
    """The written ranges already rewritten (sorted, disjoint)."""

    __slots__ = ("_ends", "_starts")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def take(self, start: int, end: int) -> bool:
        """Claim ``[start, end)`` unless it overlaps a claim; True when taken."""
        i = bisect.bisect_right(self._starts, start)
        if i and self._ends[i - 1] > start:
            return False
        if i < len(self._starts) and self._starts[i] < end:
            return False
        self._starts.insert(i, start)
        self._ends.insert(i, end)
        return True

    def free(self, start: int, end: int) -> bool:
        """``[start, end)`` overlaps no claim."""
        i = bisect.bisect_right(self._starts, start)
        if i and self._ends[i - 1] > start:
            return False
        return not (i < len(self._starts) and self._starts[i] < end)


#: The claims of the ``Rules.edits`` call running in this thread (a rule skips what is taken before it
#: computes a spoken form; ``say`` nests a call, which restores the outer one).
_RUN = threading.local()


Rule = Callable[[str], Iterator[Edit]]


class Rules:
    """The rules of one language (``speech``; None: the language-neutral ones only) and options."""

    def __init__(self, speech: Speech | None, options: TextOptions) -> None:
        self.speech = speech
        self.options = options
        rules: list[Rule] = []
        o = options
        if o.verbatim:
            verbatim = re.compile(o.verbatim)
            rules.append(
                lambda text: (
                    Edit(m.start(), m.end(), m.group(), "verbatim") for m in verbatim.finditer(text)
                )
            )
        if o.markdown:
            from ttsbridge.text.markdown import markdown_edits

            rules.append(markdown_edits)
        if speech is not None:
            self._currency_re = self._currency_patterns(speech)
            self._unit_re = self._unit_pattern(speech)
            self._month_res = self._month_patterns(speech)
            if o.emails:
                rules.append(self._emails)
            if o.urls:
                rules.append(self._urls)
            if o.phones:
                rules.append(self._phones)
            if o.dates:
                rules.append(self._dates)
            if o.phones:
                rules.append(self._digit_groups)
            if o.numbers:
                rules.append(self._ranges)
            if o.dates:
                rules.append(self._times)
            if o.numbers:
                rules += [
                    self._currencies,
                    self._percents,
                    self._units,
                    self._ordinals,
                    self._years,
                    self._hash,
                ]
                rules += [self._fractions, self._numbers]
            if o.acronyms:
                rules.append(self._acronyms)
            rules.append(self._symbols)
        if o.quotes:
            rules.append(self._quotes)
        if o.emoji:
            rules.append(self._emoji)
        self._rules = rules

    def edits(self, text: str, first: Iterator[Edit] | None = None) -> list[Edit]:
        """Every rewrite of ``text``, in order of position. ``first``: edits that come before every rule (the
        lexicon's), taken in their order."""
        claims = _Claims()
        out: list[Edit] = []
        rules: list[Rule] = list(self._rules)
        if first is not None:
            pre = list(first)
            rules.insert(bool(self.options.verbatim) + bool(self.options.markdown), lambda _t: iter(pre))
        outer = getattr(_RUN, "claims", None)
        _RUN.claims = claims
        try:
            for rule in rules:
                for edit in rule(text):
                    if edit.end > edit.start and claims.take(edit.start, edit.end):
                        out.append(edit)
        finally:
            _RUN.claims = outer
        out.sort(key=lambda e: e.start)
        return out

    @staticmethod
    def _free(matches: Iterator[re.Match[str]]) -> Iterator[re.Match[str]]:
        """The matches that overlap nothing rewritten before (their spoken form is not computed for nothing)."""
        claims: _Claims = _RUN.claims
        return (m for m in matches if claims.free(m.start(), m.end()))

    def say(self, text: str) -> str:
        """``text`` (a part of a match: one side of a range) in its spoken form by every rule."""
        edits = self.edits(text)
        parts: list[str] = []
        at = 0
        for e in edits:
            parts.append(text[at : e.start])
            parts.append(e.spoken)
            at = e.end
        parts.append(text[at:])
        return "".join(parts)

    # -- patterns built from the language's tables (CLDR)

    @staticmethod
    def _currency_patterns(speech: Speech) -> tuple[re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
        syms = "|".join(re.escape(s) for s in sorted(speech.currency_symbols, key=len, reverse=True))
        pre = re.compile(
            r"(?<![\w$])(?P<neg>[-−])?(?P<sym>" + syms + r")\s?(?P<num>" + NUM + r")"
            r"(?:\s?(?P<mag>" + _MAG + r")(?![\w]))?"
        )
        post = re.compile(r"(?<![\w.,])(?P<neg>[-−])?(?P<num>" + NUM + r")\s?(?P<sym>" + syms + r")(?![\w$])")
        iso = re.compile(
            r"(?<![\w.,])(?:(?P<code>[A-Z]{3})\s?(?P<num>" + NUM + r")(?:\s?(?P<mag>" + _MAG + r")(?![\w]))?"
            r"|(?P<num2>" + NUM + r")(?:\s?(?P<mag2>" + _MAG + r"))?\s(?P<code2>[A-Z]{3}))(?![\w])"
        )
        return pre, post, iso

    @staticmethod
    def _unit_pattern(speech: Speech) -> re.Pattern[str]:
        alts = "|".join(re.escape(u) for u in sorted(speech.units, key=len, reverse=True))
        return re.compile(r"(?<![\w.,])(?P<num>" + NUM + r")(?P<sp>\s?)(?P<unit>" + alts + r")(?![\w°/²³])")

    @staticmethod
    def _month_patterns(speech: Speech) -> list[re.Pattern[str]]:
        months = "|".join(re.escape(m) for m in sorted(speech.month_numbers, key=len, reverse=True))
        if speech.language == "es":
            return [
                re.compile(
                    r"(?<![\w])(?P<d>\d{1,2})\s+de\s+(?P<mon>"
                    + months
                    + r")(?:\s+(?:de|del)\s+(?P<y>\d{4}))?(?![\w])",
                    re.IGNORECASE,
                )
            ]
        suffix = r"(?:st|nd|rd|th)?"
        return [
            re.compile(
                r"(?<![\w])(?P<mon>"
                + months
                + r")\.?\s+(?P<d>\d{1,2})"
                + suffix
                + r"(?:,?\s+(?P<y>\d{4}))?(?![\w])",
                re.IGNORECASE,
            ),
            re.compile(
                r"(?<![\w])(?P<d>\d{1,2})"
                + suffix
                + r"\s+(?:of\s+)?(?P<mon>"
                + months
                + r")\.?(?:,?\s+(?P<y>\d{4}))?(?![\w])",
                re.IGNORECASE,
            ),
        ]

    # -- helpers

    def _cue_before(self, text: str, start: int) -> bool:
        """The word before ``start`` is one of the language's date cues ("on", "by", "el"...)."""
        m = re.search(r"([^\W\d_]+)\W*$", text[max(0, start - 24) : start])
        return bool(m) and self.speech is not None and m.group(1).lower() in self.speech.date_cues

    def _spoken_number(self, written: str) -> tuple[Decimal, str] | None:
        """(value, spoken) of a written number, or None."""
        speech = self.speech
        assert speech is not None
        parsed = speech.parse_number(written)
        if parsed is None:
            return None
        value, fraction = parsed
        digits = written.replace(speech.group_symbol, "").replace(",", "").replace(".", "")
        grouped = any(c in written for c in ".,") and not fraction
        if (
            not fraction
            and not grouped
            and (
                (len(written) > 1 and written.startswith("0"))
                or (len(digits) >= 7 and not written.endswith("000"))
            )
        ):
            return value, speech.digits(written)  # a code or an id: digit by digit
        if abs(value) >= Decimal(10) ** 15:
            return value, speech.digits(written)
        return value, speech.number(value, fraction)

    # -- the rules (each yields its matches; the engine keeps those that do not overlap)

    def _emails(self, text: str) -> Iterator[Edit]:
        if "@" not in text:
            return
        for m in self._free(_EMAIL.finditer(text)):
            local, domain = m.group().split("@", 1)
            spoken = f"{self._read_address(local)} {self.speech.symbol('@')} {self._read_domain(domain)}"  # type: ignore[union-attr]
            yield Edit(m.start(), m.end(), spoken, "email")

    def _urls(self, text: str) -> Iterator[Edit]:
        if "." not in text:
            return
        for m in self._free(_URL.finditer(text)):
            url = m.group()
            rest = re.sub(r"^https?://", "", url, flags=re.IGNORECASE)
            rest = re.split(r"[?#]", rest, maxsplit=1)[0].rstrip("/")
            host, _, path = rest.partition("/")
            spoken = self._read_domain(host, www=True)
            if path:
                spoken += " " + " ".join(
                    f"{self.speech.symbol('/')} {self._read_address(p)}"
                    for p in path.split("/")
                    if p  # type: ignore[union-attr]
                )
            yield Edit(m.start(), m.end(), spoken, "url")

    def _read_address(self, part: str) -> str:
        """A local part or a path segment: words as written, digits one by one, separators named."""
        speech = self.speech
        assert speech is not None
        out: list[str] = []
        for tok in _WORDISH.findall(part):
            if tok.isdigit():
                out.append(speech.digits(tok))
            elif tok.isalpha():
                out.append(speech.letters(tok) if tok.isupper() and len(tok) > 1 else tok)
            else:
                out.append(speech.symbol(tok))
        return " ".join(out)

    def _read_domain(self, host: str, *, www: bool = False) -> str:
        speech = self.speech
        assert speech is not None
        labels = host.split(".")
        out: list[str] = []
        for i, label in enumerate(labels):
            if www and i == 0 and label.lower() == "www":
                out.append(speech.letters("WWW"))
            elif i == len(labels) - 1 and i > 0 and len(label) == 2 and label.isalpha():
                out.append(speech.letters(label.lower()))  # a country code: "io", "es"
            else:
                out.append(self._read_address(label))
        return f" {speech.symbol('.')} ".join(out)

    def _phones(self, text: str) -> Iterator[Edit]:
        if not any(sum(c.isdigit() for c in m.group()) >= 7 for m in _PHONEISH.finditer(text)):
            return  # (libphonenumber's matcher is the costliest rule: only where a phone number may be)
        speech = self.speech
        assert speech is not None
        fmt = phonenumbers.PhoneNumberFormat
        for match in phonenumbers.PhoneNumberMatcher(
            text, speech.region, leniency=phonenumbers.Leniency.VALID
        ):
            raw = match.raw_string
            groups = re.findall(r"\d+", raw)
            shown = re.findall(
                r"\d+",
                phonenumbers.format_number(
                    match.number, fmt.INTERNATIONAL if raw.startswith("+") else fmt.NATIONAL
                ),
            )
            if len(groups) == 1:  # written without separators: group as the country writes it
                groups = shown
            elif not _coarsens(groups, shown):
                continue  # grouped unlike a phone number of that country ("2019–2024 40"): not one

            spoken = ", ".join(speech.digits(g) for g in groups)
            if raw.startswith("+"):
                spoken = f"{speech.words['plus']} {spoken}"
            yield Edit(match.start, match.end, spoken, "phone")

    def _digit_groups(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for m in self._free(_DIGIT_GROUPS.finditer(text)):
            written = m.group()
            if sum(c.isdigit() for c in written) < 7:
                continue
            if "-" not in written and speech.parse_number(written) is not None:
                continue  # "1.234.567": a number in this language
            groups = re.findall(r"\d+", written)
            if len(groups) == 2 and all(len(g) == 4 and 1000 <= int(g) <= 2099 for g in groups):
                continue  # "2019-2024": years (a range)
            yield Edit(m.start(), m.end(), ", ".join(speech.digits(g) for g in groups), "digits")

    def _dates(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for m in self._free(_ISO_DATE.finditer(text)):
            spoken = self._date(int(m.group("y")), int(m.group("a")), int(m.group("b")))
            if spoken:
                yield Edit(m.start(), m.end(), spoken, "date")
        for m in self._free(_NUMERIC_DATE.finditer(text)):
            y = m.group("y")
            if y is None and (m.group("sep") != "/" or not self._cue_before(text, m.start())):
                continue  # "1/2" without a cue is a fraction, "3.5" a number
            a, b = int(m.group("a")), int(m.group("b"))
            month, day = (a, b) if speech.month_first() else (b, a)
            year = (
                None
                if y is None
                else int(y) + (2000 if len(y) == 2 and int(y) < 70 else 1900 if len(y) == 2 else 0)
            )
            spoken = self._date(year, month, day)
            if spoken:
                yield Edit(m.start(), m.end(), spoken, "date")
        for pattern in self._month_res:
            for m in self._free(pattern.finditer(text)):
                month = speech.month_numbers.get(m.group("mon").lower().rstrip("."))
                y = m.group("y")
                spoken = self._date(int(y) if y else None, month or 0, int(m.group("d")))
                if spoken:
                    yield Edit(m.start(), m.end(), spoken, "date")

    def _date(self, year: int | None, month: int, day: int) -> str | None:
        import datetime

        try:
            datetime.date(year or 2000, month, day)  # (2000: a leap year, so 29/2 without a year is a date)
        except ValueError:
            return None
        return self.speech.date(year, month, day)  # type: ignore[union-attr]

    def _times(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for pattern in (_TIME, _HOUR):
            for m in self._free(pattern.finditer(text)):
                mer = m.group("mer")
                meridiem = None if mer is None else ("am" if mer in "aA" else "pm")
                hour = int(m.group("h"))
                minute = int(m.groupdict().get("m") or 0)
                if meridiem is not None and hour > 12:
                    continue
                spoken = speech.time(hour, minute, meridiem)
                end = m.end()
                if meridiem and m.group().endswith(".") and re.match(r"\s*(?:$|[A-Z])", text[end:]):
                    spoken += "."  # "5 p.m." ending a sentence keeps its period
                yield Edit(m.start(), end, spoken, "time")

    def _ranges(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for m in self._free(_RANGE.finditer(text)):
            a, b = m.group("a"), m.group("b")
            da, db = re.sub(r"\D", "", a), re.sub(r"\D", "", b)
            if len(db) > 1 and db.startswith("0") and ":" not in b:
                continue  # "555-0134": a number, not a range
            if m.group("tight") and len(da) + len(db) >= 7 and not (len(da) == len(db) == 4):
                continue  # a code
            if (
                a.isdigit()
                and b.isdigit()
                and len(a) == len(b) == 4
                and all(1000 <= int(x) <= 2099 for x in (a, b))
            ):
                spoken = f"{speech.year(int(a))} {speech.words['to']} {speech.year(int(b))}"
            else:
                sym = re.match(r"[$€£¥₹]", a)
                if sym and not re.match(r"[$€£¥₹]", b):
                    b = sym.group() + b  # "$5-10": five dollars to ten dollars
                spoken = f"{self.say(a)} {speech.words['to']} {self.say(b)}"
            yield Edit(m.start(), m.end(), spoken, "range")

    def _currencies(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        pre, post, iso = self._currency_re
        for pattern in (pre, post):
            for m in self._free(pattern.finditer(text)):
                code = speech.currency_symbols.get(m.group("sym"))
                spoken = self._money(m.group("num"), code, m.groupdict().get("mag"), bool(m.group("neg")))
                if spoken:
                    yield Edit(m.start(), m.end(), spoken, "currency")
        if not re.search(r"[A-Z]{3}", text):
            return
        codes = _currency_codes()
        for m in self._free(iso.finditer(text)):
            code = m.group("code") or m.group("code2")
            if code not in codes:
                continue
            spoken = self._money(
                m.group("num") or m.group("num2"), code, m.group("mag") or m.group("mag2"), False
            )
            if spoken:
                yield Edit(m.start(), m.end(), spoken, "currency")

    def _money(self, written: str, code: str | None, magnitude: str | None, negative: bool) -> str | None:
        speech = self.speech
        if code is None or speech is None:
            return None
        parsed = speech.parse_number(written)
        if parsed is None:
            return None
        amount = parsed[0]
        if magnitude:
            amount = (amount * Decimal(10) ** MAGNITUDES[magnitude]).normalize()
            if amount != amount.to_integral_value():
                amount = amount.quantize(Decimal("0.01"))
        if negative:
            amount = -amount
        return speech.currency(amount, code)

    def _percents(self, text: str) -> Iterator[Edit]:
        if "%" not in text:
            return
        speech = self.speech
        assert speech is not None
        for m in self._free(_PERCENT.finditer(text)):
            spoken = self._signed_number(m)
            if spoken is not None:
                yield Edit(m.start(), m.end(), speech.percent(spoken), "percent")

    def _units(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for m in self._free(self._unit_re.finditer(text)):
            abbr = m.group("unit")
            if m.group("sp") and speech.glued_only(abbr):
                continue
            said = self._spoken_number(m.group("num"))
            if said is None:
                continue
            yield Edit(m.start(), m.end(), speech.unit(said[0], said[1], speech.units[abbr]), "unit")

    def _ordinals(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        pattern = _ORDINAL_ES if speech.language == "es" else _ORDINAL_EN
        for m in self._free(pattern.finditer(text)):
            n = int(m.group("num"))
            suf = m.group("suf")
            feminine = suf in ("ª", "ra", "da", "ta")
            spoken = speech.ordinal(n, feminine=feminine)
            if suf == "er":  # "1er", "3er": "primer", "tercer"
                spoken = spoken[:-1] if spoken.endswith("o") else spoken
            yield Edit(m.start(), m.end(), spoken, "ordinal")

    def _years(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        for m in self._free(_YEAR.finditer(text)):
            y = int(m.group("y"))
            cued = self._cue_before(text, m.start())
            if not (1900 <= y <= 2099 or (cued and y >= 1000)) and not m.group("s"):
                continue
            spoken = speech.decade(y) if m.group("s") else speech.year(y)
            yield Edit(m.start(), m.end(), spoken, "year")

    def _fractions(self, text: str) -> Iterator[Edit]:
        if "/" not in text:
            return
        speech = self.speech
        assert speech is not None
        for m in self._free(_FRACTION.finditer(text)):
            n, d = int(m.group("n")), int(m.group("d"))
            if d > 1:
                yield Edit(m.start(), m.end(), speech.fraction_of(n, d), "number")

    def _numbers(self, text: str) -> Iterator[Edit]:
        for m in self._free(_NUMBER.finditer(text)):
            spoken = self._signed_number(m)
            if spoken is not None:
                yield Edit(m.start(), m.end(), spoken, "number")

    def _signed_number(self, m: re.Match[str]) -> str | None:
        """A match's ``num`` read out, after its ``sign`` ("plus" / "minus") if it has one; None when the
        number is not one the language reads."""
        speech = self.speech
        assert speech is not None
        said = self._spoken_number(m.group("num"))
        if said is None:
            return None
        sign = m.group("sign")
        return f"{speech.words['plus' if sign == '+' else 'minus']} {said[1]}" if sign else said[1]

    def _acronyms(self, text: str) -> Iterator[Edit]:
        if _SHOUTING.search(text):
            return  # shouting, not acronyms
        speech = self.speech
        assert speech is not None
        for m in self._free(_ACRONYM.finditer(text)):
            word = m.group("w")
            if _ROMAN.match(word) or word in speech.currency_symbols:
                continue
            yield Edit(m.start(), m.end(), speech.letters(m.group()), "acronym")

    def _symbols(self, text: str) -> Iterator[Edit]:
        speech = self.speech
        assert speech is not None
        if "&" in text:
            for m in self._free(_AMPERSAND.finditer(text)):
                glued = m.start() > 0 and not text[m.start() - 1].isspace()
                word = speech.words["and"]
                yield Edit(m.start(), m.end(), f" {word} " if glued else word, "symbol")

    def _hash(self, text: str) -> Iterator[Edit]:
        if "#" not in text:
            return
        speech = self.speech
        assert speech is not None
        for m in self._free(_HASH_NUMBER.finditer(text)):
            n = speech.cardinal(int(m.group("num")))
            yield Edit(m.start(), m.end(), f"{speech.words['number']} {n}", "symbol")

    def _quotes(self, text: str) -> Iterator[Edit]:
        for m in self._free(_QUOTES.finditer(text)):
            yield Edit(m.start(), m.end(), _QUOTE_FOLD[m.group()], "quotes")

    def _emoji(self, text: str) -> Iterator[Edit]:
        for m in self._free(_EMOJI.finditer(text)):
            yield Edit(m.start(), m.end(), "", "emoji")


def _coarsens(groups: list[str], shown: list[str]) -> bool:
    """Each of ``groups`` is one or more consecutive groups of ``shown`` (the number as its country writes
    it): "415 5550134" coarsens "415 555 0134", "2019 2024 40" does not."""
    want = list(shown)
    for g in groups:
        acc = ""
        while want and len(acc) < len(g):
            acc += want.pop(0)
        if acc != g:
            return False
    return not want


_CODES: frozenset[str] | None = None


def _currency_codes() -> frozenset[str]:
    global _CODES
    if _CODES is None:
        _CODES = frozenset(list_currencies())
    return _CODES
