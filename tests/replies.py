"""Random LLM replies built from every class the normalizer rewrites (hypothesis strategies), shared by the
pure property test and the adapters' (Pipecat, LiveKit) property tests."""

from __future__ import annotations

import itertools
import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from ttsbridge.text import Lexicon, TextNormalizer

WORDS = [
    "sure",
    "your",
    "order",
    "is",
    "ready",
    "and",
    "we",
    "will",
    "call",
    "you",
    "Thanks",
    "the",
    "total",
    "today",
]

#: The adapters' property tests: 5 derandomized examples each (the suite's run); TTSBRIDGE_TEXT_EXAMPLES=N runs
#: N random ones instead (a deeper run).
ADAPTER_PROPERTY = settings(
    max_examples=int(os.environ.get("TTSBRIDGE_TEXT_EXAMPLES", 5)),
    derandomize=not os.environ.get("TTSBRIDGE_TEXT_EXAMPLES"),
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: The lexicon the replies use (its word is one of the classes).
LEXICON = {"Nineninesix": "nine nine six"}


def normalizer() -> TextNormalizer:
    return TextNormalizer(lexicon=Lexicon(LEXICON))


def _n(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


ITEMS: dict[str, st.SearchStrategy[str]] = {
    "word": st.sampled_from(WORDS),
    "cardinal": st.one_of(_n(0, 99).map(str), _n(1000, 9_999_999).map(lambda n: f"{n:,}")),
    "decimal": st.builds(lambda a, b: f"{a}.{b}", _n(0, 99), _n(1, 99)),
    "ordinal": _n(1, 40).map(
        lambda n: f"{n}{'th' if 10 < n % 100 < 14 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
    ),
    "currency": st.one_of(
        st.builds(lambda a, c: f"${a:,}.{c:02d}", _n(1, 99_999), _n(0, 99)),
        _n(1, 500).map(lambda a: f"€{a}"),
        st.builds(lambda a, code: f"{code} {a}", _n(2, 90), st.sampled_from(["USD", "EUR", "GBP"])),
        _n(2, 9).map(lambda a: f"${a} billion"),
    ),
    "percent": st.one_of(
        _n(1, 99).map(lambda n: f"{n}%"), st.builds(lambda a, b: f"{a}.{b}%", _n(1, 9), _n(1, 9))
    ),
    "phone": st.one_of(
        _n(0, 99).map(lambda n: f"+1 (415) 555-01{n:02d}"),
        _n(0, 99).map(lambda n: f"(212) 555-01{n:02d}"),
        st.just("+44 20 7946 0958"),
    ),
    "email": st.builds(
        lambda a, b: f"{a}@{b}.io",
        st.sampled_from(["help", "ana.b", "sales42"]),
        st.sampled_from(["acme", "shop"]),
    ),
    "url": st.sampled_from(["https://acme.io/docs", "www.example.com", "shop.example.com/o/42"]),
    "date": st.one_of(
        st.builds(lambda m, d: f"{m}/{d:02d}/2025", _n(1, 12), _n(1, 28)),
        st.builds(lambda d: f"May {d}th", _n(4, 20)),
        st.just("2025-12-05"),
    ),
    "time": st.one_of(
        st.builds(lambda h, m: f"{h}:{m:02d} pm", _n(1, 12), _n(0, 59)), _n(1, 12).map(lambda h: f"{h}am")
    ),
    "unit": st.one_of(
        _n(1, 99).map(lambda n: f"{n} km"), st.builds(lambda a, b: f"{a}.{b} GB", _n(1, 9), _n(1, 9))
    ),
    "year": _n(1950, 2030).map(lambda y: f"in {y}"),
    "range": st.one_of(st.builds(lambda a, b: f"{a}-{a + b}", _n(1, 50), _n(1, 50)), st.just("2019–2024")),
    "acronym": st.sampled_from(["API", "HTTP", "APIs", "SQL"]),
    "markdown": st.one_of(
        st.sampled_from(WORDS).map(lambda w: f"**{w}**"),
        st.sampled_from(WORDS).map(lambda w: f"*{w}*"),
        st.sampled_from(WORDS).map(lambda w: f"`{w}`"),
        st.sampled_from(WORDS).map(lambda w: f"[{w}](https://x.io/{w})"),
    ),
    "emoji": st.sampled_from(["🎉", "👋", "✅"]),
    "quotes": st.sampled_from(["“great”", "it’s", "‘fine’"]),
    "lexicon": st.just("Nineninesix"),
}


@st.composite
def replies(draw: st.DrawFn, *, min_items: int = 3, max_items: int = 14) -> str:
    """A reply: sentences of words and class items, every class represented across examples."""
    kinds = draw(st.lists(st.sampled_from(sorted(ITEMS)), min_size=min_items, max_size=max_items))
    parts: list[str] = []
    for i, kind in enumerate(kinds):
        parts.append(draw(ITEMS[kind]))
        if i < len(kinds) - 1:
            parts.append(draw(st.sampled_from([" ", " ", " ", ", ", ". "])))
    text = "".join(parts).strip()
    return (text[0].upper() + text[1:] if text[0].islower() else text) + draw(
        st.sampled_from([".", "!", "?"])
    )


@st.composite
def tokens(draw: st.DrawFn, text: str) -> list[str]:
    """``text`` cut at random places into LLM tokens."""
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(text) - 1)), max_size=len(text) // 2))))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def rewritten_ranges(text: str, norm: TextNormalizer | None = None) -> list[tuple[int, int]]:
    """Where the whole text's rewritten spans lie in it (written offsets)."""
    out = (norm or normalizer()).normalize(text)
    at, ranges = 0, []
    for span in out.spans:
        if span.rewritten:
            ranges.append((at, at + len(span.written)))
        at += len(span.written)
    return ranges


def check_heard(heard: str, text: str, ranges: list[tuple[int, int]]) -> None:
    """The heard text kept in the LLM context: a prefix of the LLM's text ending on a word boundary, never
    inside a rewritten span (so it holds no spoken-form character the LLM did not write, and no unit not all
    played)."""
    assert text.startswith(heard), (heard, text)
    p = len(heard)
    assert p == 0 or p == len(text) or text[p].isspace() or text[p - 1].isspace(), (heard, text)
    for a, b in ranges:
        assert not a < p < b, (heard, text[a:b])


def sent_transcripts(emu: Any) -> list[str]:
    """The transcripts an emulator's provider was sent, in order (Nineninesix transcripts, Kitta segments)."""
    ws = [m["transcript"] for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    return ws + list(emu.stats.kitta_segment_texts)


def unit_bounds(text: str, norm: TextNormalizer) -> list[tuple[int, int, int]]:
    """Each rewritten span of ``text`` as (first word, end word, spoken words up to its end)."""
    out = norm.normalize(text)
    at, bounds = 0, []
    for span in out.spans:
        end = at + len(span.written)
        if span.rewritten:
            first = len(text[:at].split())
            spoken_words = len(out.spoken[: out.spoken_for(end)].split())
            bounds.append((first, first + len(span.written.split()), spoken_words))
        at = end
    return bounds


def check_kept(heard: str, text: str, played: float, transcripts: list[str], norm: TextNormalizer) -> None:
    """What a framework kept as heard (words joined by spaces) against the LLM's ``text`` and the audio
    ``played``: the LLM's own words, a prefix, in order; never ending inside a rewritten span; the last
    rewritten span kept all played (the tone voice's true times, 60 ms per character of each transcript;
    0.1 s of slack for the estimate between reported ends)."""
    from heard import word_ends

    words, kept = text.split(), heard.split()
    assert kept == words[: len(kept)], (heard, text)
    k, ends = len(kept), word_ends(transcripts)
    for first, end, spoken_words in unit_bounds(text, norm):
        assert not first < k < end, (heard, " ".join(words[first:end]))
        if end <= k and 0 < spoken_words <= len(ends):
            assert ends[spoken_words - 1][1] <= played + 0.1, (" ".join(words[first:end]), played)
