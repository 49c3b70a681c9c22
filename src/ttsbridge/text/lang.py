"""How a language says what the rules find: :class:`Speech` and its :class:`English` and :class:`Spanish`.

Numbers (cardinals, ordinals, years, currencies with their forms) come from ``num2words``; month names,
currency names, unit names (with their plurals), currency symbols and the locale's number separators from
``babel`` (CLDR). A language adds only its few connecting words (``"point"``, ``"at"``, ``"to"``...) and the
grammar ``num2words`` leaves out (Spanish ``"de"`` after ``"millones"``, ``"primero"`` for the first day).

Imported on the first text that needs it (``num2words`` and ``babel`` are not imported with the adapters).
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal, InvalidOperation
from typing import ClassVar

from babel import Locale, UnknownLocaleError
from babel.dates import get_month_names
from babel.numbers import (
    NumberFormatError,
    format_decimal,
    get_currency_name,
    get_currency_symbol,
    get_decimal_symbol,
    get_group_symbol,
    get_territory_currencies,
    list_currencies,
    parse_decimal,
)
from babel.units import format_unit
from num2words import CONVERTER_CLASSES, num2words

__all__ = ["English", "Spanish", "Speech", "speech_for"]

#: Units recognized after a number, by CLDR id; their abbreviations and names (singular and plural) are the
#: locale's own, from CLDR (an abbreviation that is also a common word is read only right after a digit).
UNIT_IDS = (
    "length-kilometer", "length-meter", "length-centimeter", "length-millimeter", "length-mile",
    "length-foot", "length-inch", "length-yard", "mass-kilogram", "mass-gram", "mass-milligram",
    "mass-pound", "mass-ounce", "mass-ton", "volume-liter", "volume-milliliter", "volume-gallon",
    "speed-kilometer-per-hour", "speed-mile-per-hour", "speed-meter-per-second", "temperature-celsius",
    "temperature-fahrenheit", "digital-terabyte", "digital-gigabyte", "digital-megabyte", "digital-kilobyte",
    "digital-gigabit", "digital-megabit", "frequency-gigahertz", "frequency-megahertz", "frequency-kilohertz",
    "frequency-hertz", "power-kilowatt", "power-watt", "energy-kilowatt-hour", "energy-kilocalorie",
    "area-square-kilometer", "area-square-meter", "area-square-foot", "area-hectare", "duration-hour",
    "duration-minute", "duration-second", "duration-millisecond",
)  # fmt: skip
#: Abbreviations that are also words (or too short to be safe): read as units only right after a digit.
_GLUED_ONLY = frozenset({"in", "m", "g", "h", "s", "l", "t", "min", "mi", "ft", "yd", "oz", "ms", "W"})
#: Currencies whose symbols are tried after the locale's own (the locale's symbol for them wins).
_COMMON_CURRENCIES = (
    "USD", "EUR", "GBP", "JPY", "INR", "CNY", "KRW", "MXN", "CAD", "AUD", "BRL", "CHF", "RUB", "TRY", "ILS",
)  # fmt: skip
#: Magnitude suffixes after an amount ("$1.2M", "$3 billion"): the power of ten.
MAGNITUDES = {
    "k": 3, "K": 3, "thousand": 3, "M": 6, "MM": 6, "mn": 6, "million": 6, "B": 9, "bn": 9, "billion": 9,
    "T": 12, "tn": 12, "trillion": 12,
}  # fmt: skip

_DIGITS = "0123456789"


class Speech:
    """The spoken forms of one language (one locale). Subclasses set :attr:`words` and override the grammar."""

    #: The language code (``num2words``' too).
    language: ClassVar[str] = ""
    #: The region assumed when the tag names none (phone numbers, currency symbols, date order).
    default_region: ClassVar[str] = ""
    #: The connecting words: ``point`` (decimals), ``minus``, ``plus``, ``percent``, ``at``, ``dot``,
    #: ``dash``, ``underscore``, ``slash``, ``colon``, ``to`` (ranges), ``and`` (``&``), ``number`` (``#``).
    words: ClassVar[dict[str, str]] = {}
    #: Words before a number that make a D/M (or M/D) without a year a date, and a 4-digit number a year.
    date_cues: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, region: str | None = None) -> None:
        self.region = (region or self.default_region).upper()
        try:
            self.locale = Locale.parse(f"{self.language}_{self.region}")
        except (UnknownLocaleError, ValueError):
            self.region = self.default_region
            self.locale = Locale.parse(f"{self.language}_{self.region}")
        self.decimal_symbol = get_decimal_symbol(self.locale)
        self.group_symbol = get_group_symbol(self.locale)
        self._converter = CONVERTER_CLASSES[self.language]
        self._digit_words = [self._n2w(int(d)) for d in _DIGITS]
        self.months = {m: name for m, name in get_month_names("wide", locale=self.locale).items()}
        self.month_numbers = self._month_lookup()
        self.currency_symbols = self._currency_symbols()
        self.units = self._unit_abbreviations()

    # -- tables from CLDR

    def _month_lookup(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for width in ("wide", "abbreviated"):
            for m, name in get_month_names(width, locale=self.locale).items():
                out[name.lower().rstrip(".")] = m
        return out

    def _currency_symbols(self) -> dict[str, str]:
        """Symbol -> ISO code: the locale's own currency, then common ones, in the locale's symbols, then every
        currency's English symbol (``$``, ``€``, ``£``, ``¥``, ``₹``, ``R$``...); alphabetic codes are not
        symbols (ISO codes are matched on their own)."""
        out: dict[str, str] = {}
        own = list(get_territory_currencies(self.region)) if self.region else []
        for loc, codes in ((self.locale, [*own, *_COMMON_CURRENCIES]), ("en", sorted(list_currencies()))):
            for code in codes:
                try:
                    sym = get_currency_symbol(code, locale=loc)
                except Exception:
                    continue
                if sym and sym != code and not sym.isalpha() and sym not in out:
                    out[sym] = code
        return out

    def _unit_abbreviations(self) -> dict[str, str]:
        out: dict[str, str] = {}
        one = format_decimal(1, locale=self.locale)
        for unit in UNIT_IDS:
            try:
                short = format_unit(1, unit, length="short", locale=self.locale)
            except Exception:
                continue
            abbr = short.replace(one, "", 1).strip().replace("\u00a0", "")
            if abbr and abbr not in out and not abbr.isdigit():
                out[abbr] = unit
        for extra, unit in (
            ("°C", "temperature-celsius"),
            ("°F", "temperature-fahrenheit"),
            ("kph", "speed-kilometer-per-hour"),
        ):
            out.setdefault(extra, unit)
        return out

    def glued_only(self, abbr: str) -> bool:
        """The unit abbreviation is read as a unit only right after a digit ("5in", not "5 in")."""
        return abbr in _GLUED_ONLY or len(abbr) == 1

    # -- numbers

    def _n2w(self, n: int | Decimal, **kw: object) -> str:
        return self._tidy(num2words(n, lang=self.language, **kw))

    def _tidy(self, words: str) -> str:
        """``num2words``' output as spoken here (its commas would read as pauses)."""
        return words.replace(",", "")

    def cardinal(self, n: int) -> str:
        if n < 0:
            return f"{self.words['minus']} {self.cardinal(-n)}"
        return self._n2w(n)

    def ordinal(self, n: int, *, feminine: bool = False) -> str:
        return self._n2w(n, to="ordinal")

    def year(self, n: int) -> str:
        return self._n2w(n, to="year")

    def decade(self, n: int) -> str:
        """A decade ("1990s")."""
        return self.year(n)

    def digits(self, s: str) -> str:
        """Each digit of ``s`` as a word (other characters dropped)."""
        return " ".join(self._digit_words[int(c)] for c in s if c.isdigit())

    def fraction(self, digits: str) -> str:
        """The digits after the decimal point."""
        return self.digits(digits)

    def fraction_of(self, numerator: int, denominator: int) -> str:
        """A fraction ("3/4"): the numerator, then the denominator as an ordinal (plural when it is not one)."""
        name = self.ordinal(denominator)
        return f"{self.cardinal(numerator)} {name if numerator == 1 else name + 's'}"

    def number(self, value: Decimal, fraction_digits: str = "") -> str:
        """A number written with ``fraction_digits`` after its decimal point (as written: "2.50" keeps "50")."""
        sign = ""
        if value < 0:
            sign, value = f"{self.words['minus']} ", -value
        whole = int(value)
        out = self.cardinal(whole)
        if fraction_digits:
            out += f" {self.words['point']} {self.fraction(fraction_digits)}"
        return sign + out

    def parse_number(self, written: str) -> tuple[Decimal, str] | None:
        """``written`` (digits with the locale's separators) as a value and the digits after its decimal point;
        None when it is not a number here. A separator that cannot group (not three digits after it) is taken as
        the decimal point: "1.5" is 1.5 in Spanish too."""
        try:
            value = parse_decimal(written, locale=self.locale, strict=True)
            sep = self.decimal_symbol
        except (NumberFormatError, InvalidOperation, ValueError):
            other = "." if self.decimal_symbol == "," else ","
            if written.count(other) != 1:
                return None
            try:
                value = Decimal(written.replace(other, "."))
            except InvalidOperation:
                return None
            sep = other
        fraction = written.rsplit(sep, 1)[1] if sep in written else ""
        if not fraction.isdigit():
            fraction = ""
        return value, fraction

    # -- money, percentages, units

    def currency(self, amount: Decimal, code: str) -> str:
        """``amount`` of the currency ``code``: the major unit, then the minor one when there is one."""
        sign = ""
        if amount < 0:
            sign, amount = f"{self.words['minus']} ", -amount
        forms = getattr(self._converter, "CURRENCY_FORMS", {}).get(code)
        whole = int(amount)
        cents = int((amount - whole) * 100 + Decimal("0.5")) if amount != whole else 0
        if cents >= 100:
            whole, cents = whole + 1, 0
        if forms is None or not isinstance(forms, tuple) or len(forms) != 2:
            name = get_currency_name(code, count=amount if cents else whole, locale=self.locale)
            frac = f"{cents:02d}" if cents else ""
            return sign + self._with_name(self.number(Decimal(whole), frac), name, whole)
        sep = self.words["and_money"]
        try:  # num2words' own reading (gender, "un"/"una", plurals); its ", zero cents" dropped
            raw = num2words(
                Decimal(whole) + Decimal(cents) / 100,
                lang=self.language,
                to="currency",
                currency=code,
                separator=f" {sep}",
            )
        except Exception:
            return sign + self._with_name(self.number(Decimal(whole)), code, whole)
        major, found, minor = raw.rpartition(f" {sep} ")
        if not found:
            major, minor = raw, ""
        major, minor = self._money_words(self._tidy(major)), self._tidy(minor)
        if whole == 0 and cents:  # "$0.99": ninety-nine cents
            return sign + minor
        return sign + (f"{major} {sep} {minor}" if cents else major)

    def _money_words(self, major: str) -> str:
        """The amount and name of the major unit as the language says it (a hook)."""
        return major

    def _with_name(self, number: str, name: str, whole: int) -> str:
        return f"{number} {name}"

    def percent(self, spoken_number: str) -> str:
        return f"{spoken_number} {self.words['percent']}"

    def unit(self, value: Decimal, spoken_number: str, unit: str) -> str:
        """``value`` of ``unit`` (a CLDR id) with the number spoken: CLDR's long name, in the right plural."""
        try:
            long = format_unit(value, unit, length="long", locale=self.locale)
        except Exception:
            return spoken_number
        written = format_decimal(value, locale=self.locale)
        return long.replace(written, spoken_number, 1) if written in long else f"{spoken_number} {long}"

    # -- dates and times

    def date(self, year: int | None, month: int, day: int) -> str:
        raise NotImplementedError

    def time(self, hour: int, minute: int, meridiem: str | None) -> str:
        raise NotImplementedError

    def month_first(self) -> bool:
        """Numeric dates without a year name the month first (M/D: the US)."""
        return False

    # -- letters, symbols

    def letters(self, word: str) -> str:
        """An acronym spelled letter by letter ("API" -> "A P I"; a plural "s" kept on the last one)."""
        if len(word) > 2 and word.endswith("s") and word[:-1].isupper():
            return " ".join(word[:-2]) + f" {word[-2]}s"
        return " ".join(word)

    def symbol(self, ch: str) -> str:
        return {
            "@": self.words["at"],
            ".": self.words["dot"],
            "-": self.words["dash"],
            "_": self.words["underscore"],
            "/": self.words["slash"],
            "+": self.words["plus"],
            ":": self.words["colon"],
        }.get(ch, ch)


class English(Speech):
    language = "en"
    default_region = "US"
    words: ClassVar[dict[str, str]] = {
        "point": "point",
        "minus": "minus",
        "plus": "plus",
        "percent": "percent",
        "at": "at",
        "dot": "dot",
        "dash": "dash",
        "underscore": "underscore",
        "slash": "slash",
        "colon": "colon",
        "to": "to",
        "and": "and",
        "and_money": "and",
        "number": "number",
        "am": "a m",
        "pm": "p m",
        "oclock": "o'clock",
        "hundred": "hundred",
        "oh": "oh",
    }
    date_cues = frozenset(
        "on by until till before after from since in of due starting through thru the".split()
    )

    def _tidy(self, words: str) -> str:
        out = super()._tidy(words)
        # American English reads "one hundred five", British "one hundred and five".
        return out.replace(" and ", " ") if self.region not in ("GB", "IE", "AU", "NZ", "IN") else out

    def month_first(self) -> bool:
        return self.region in ("US", "PH", "CA", "")

    def fraction_of(self, numerator: int, denominator: int) -> str:
        names = {2: ("half", "halves"), 4: ("quarter", "quarters")}
        one, many = names.get(denominator, (self.ordinal(denominator), self.ordinal(denominator) + "s"))
        return f"{self.cardinal(numerator)} {one if numerator == 1 else many}"

    def decade(self, n: int) -> str:
        words = self.year(n).split()
        last = words[-1]
        if last.endswith("y"):
            words[-1] = last[:-1] + "ies"
        elif "-" in last:
            head, tail = last.rsplit("-", 1)
            words[-1] = f"{head}-{tail}s"
        else:
            words[-1] = last + "s"
        return " ".join(words)

    def date(self, year: int | None, month: int, day: int) -> str:
        out = f"{self.months[month]} {self.ordinal(day)}"
        return f"{out}, {self.year(year)}" if year is not None else out

    def time(self, hour: int, minute: int, meridiem: str | None) -> str:
        w = self.words
        h = self.cardinal(hour if meridiem is None or hour != 0 else 12)
        if minute == 0:
            if meridiem is not None:
                return f"{h} {w[meridiem]}"
            return f"{h} {w['oclock']}" if 0 < hour <= 12 else f"{h} {w['hundred']}"
        m = f"{w['oh']} {self.cardinal(minute)}" if minute < 10 else self.cardinal(minute)
        return f"{h} {m} {w[meridiem]}" if meridiem is not None else f"{h} {m}"


class Spanish(Speech):
    """Spanish. Chosen as the second language because it exercises what English does not: the decimal comma
    and the period for thousands (``"1.234,50 €"``, parsed by the locale), the currency after the amount,
    gender and apocopation in numbers (``"un dólar"``, ``"veintiún euros"``, ``"primera"``), dates read as
    ``"cinco de mayo"`` with cardinals, and 24-hour times; and ``num2words`` and CLDR cover it fully."""

    language = "es"
    default_region = "ES"
    words: ClassVar[dict[str, str]] = {
        "point": "coma",
        "minus": "menos",
        "plus": "más",
        "percent": "por ciento",
        "at": "arroba",
        "dot": "punto",
        "dash": "guion",
        "underscore": "guion bajo",
        "slash": "barra",
        "colon": "dos puntos",
        "to": "a",
        "and": "y",
        "and_money": "con",
        "number": "número",
        "am": "de la mañana",
        "pm": "de la tarde",
        "night": "de la noche",
        "oclock": "en punto",
        "past": "y",
    }
    date_cues = frozenset("el hasta desde antes después para del al día de entre".split())

    def ordinal(self, n: int, *, feminine: bool = False) -> str:
        out = self._n2w(n, to="ordinal")
        if feminine:
            out = " ".join(
                w[:-1] + "a" if w.endswith("o") else w + "a" if w.endswith("er") else w for w in out.split()
            )
        return out

    def year(self, n: int) -> str:
        return self.cardinal(n)

    def fraction_of(self, numerator: int, denominator: int) -> str:
        names = {2: "medio", 3: "tercio"}
        name = names.get(denominator) or self.ordinal(denominator)
        num = "un" if numerator == 1 else _apocope(self.cardinal(numerator))
        return f"{num} {name if numerator == 1 else name + 's'}"

    def fraction(self, digits: str) -> str:
        """Spanish reads the decimals as a number: "3,14" is "tres coma catorce", "3,05" "tres coma cero cinco"."""
        zeros = len(digits) - len(digits.lstrip("0"))
        rest = digits[zeros:]
        parts = [self._digit_words[0]] * zeros
        if rest:
            parts.append(self.cardinal(int(rest)))
        return " ".join(parts)

    def unit(self, value: Decimal, spoken_number: str, unit: str) -> str:
        # units are masculine here: "un kilómetro", "veintiún grados"
        return super().unit(value, _apocope(spoken_number), unit)

    def _with_name(self, number: str, name: str, whole: int) -> str:
        # "un millón de euros", "tres mil millones de dólares"
        if whole and re.search(r"(millón|millones)$", number):
            return f"{number} de {name}"
        return f"{number} {name}"

    def _money_words(self, major: str) -> str:
        return re.sub(r"\b(millón|millones) (?!de )(\S+)$", r"\1 de \2", major)

    def date(self, year: int | None, month: int, day: int) -> str:
        d = "primero" if day == 1 else self.cardinal(day)
        out = f"{d} de {self.months[month].lower()}"
        return f"{out} de {self.year(year)}" if year is not None else out

    def time(self, hour: int, minute: int, meridiem: str | None) -> str:
        w = self.words
        h12 = hour % 12 or 12 if meridiem is not None else hour
        h = "una" if h12 == 1 else self.cardinal(h12)
        out = f"{h} {w['oclock']}" if minute == 0 else f"{h} {w['past']} {self.cardinal(minute)}"
        if meridiem == "pm":
            return f"{out} {w['night'] if 8 <= h12 < 12 else w['pm']}"
        if meridiem == "am":
            return f"{out} {w['am']}"
        return out


def _apocope(number: str) -> str:
    """Spanish "uno" before a masculine noun: "un", "veintiún"."""
    if number.endswith("veintiuno"):
        return number[:-1].replace("veintiun", "veintiún")
    return number[:-1] if number.endswith("uno") else number


#: The languages with a speech of their own (others get the language-neutral rules only).
LANGUAGES: dict[str, type[Speech]] = {"en": English, "es": Spanish}


@functools.lru_cache(maxsize=32)
def speech_for(tag: str) -> Speech | None:
    """The :class:`Speech` of a BCP-47 tag (``"en"``, ``"en-GB"``, ``"es-MX"``); None for a language without
    one."""
    parts = re.split(r"[-_]", tag.strip())
    cls = LANGUAGES.get(parts[0].lower())
    if cls is None:
        return None
    region = next((p for p in parts[1:] if len(p) == 2 and p.isalpha()), None)
    return cls(region)
