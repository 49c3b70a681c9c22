"""The one word-timing estimator (:mod:`ttsbridge.policy.words`), in both release modes.

The tests of the two estimators it replaces (Pipecat's ``WordClock``, LiveKit's ``WordTimer``) moved here with
their expected values unchanged; only the calls follow the new API (see ``StartClock`` / ``EndClock``).
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ttsbridge.policy.words import SpeechRate, TimedWord, WordClock


class StartClock(WordClock):
    """``release="start"``, returning ``(word, start)`` pairs as the Pipecat adapter hands them over."""

    def __init__(self, rate: SpeechRate) -> None:
        super().__init__(rate, release="start")

    def add_audio(self, seconds: float) -> list[tuple[str, float]]:  # type: ignore[override]
        return [(w.word, w.start) for w in super().add_audio(seconds)]

    def end_segment(self) -> list[tuple[str, float]]:  # type: ignore[override]
        return [(w.word, w.start) for w in super().end_segment()]


class EndClock(WordClock):
    """``release="end"`` as the LiveKit adapter uses it, with the old ``WordTimer`` call names."""

    def __init__(self, chars_per_second: float = 15.0) -> None:
        super().__init__(SpeechRate(chars_per_second), release="end")

    def on_audio(self, seconds: float) -> list[TimedWord]:
        return self.add_audio(seconds)

    def finish(self) -> tuple[list[TimedWord], float | None]:
        return self.end_segment(), self.last_segment_rate


# --- release="start" (the Pipecat adapter's view: (word, start) pairs) ---------------------------------------------------------------------------------------------


def test_words_wait_for_the_audio_that_carries_them() -> None:
    clock = StartClock(SpeechRate(10.0))  # 10 chars/s: "aaaa bbbb cccc" -> starts 0.0, 0.5, 1.0
    clock.add_text("aaaa bbbb cccc", boundary=True)
    assert clock.add_audio(0.1) == [("aaaa", 0.0)]
    assert clock.add_audio(0.3) == []
    assert clock.add_audio(0.1) == [("bbbb", 0.5)]
    assert clock.words_pending == 1
    # the rest at the end, timed by the real duration (1.5 s for 15 positions: "cccc" at 10/15)
    assert clock.add_audio(1.0) == [("cccc", 1.0)]
    assert clock.end_segment() == []


def test_end_of_segment_times_the_rest_by_its_share_of_the_characters() -> None:
    clock = StartClock(SpeechRate(5.0))
    clock.add_text("one two three four", boundary=True)  # 19 positions with the boundary
    assert clock.add_audio(0.05) == [("one", 0.0)]
    rest = clock.end_segment()
    assert [w for w, _ in rest] == ["two", "three", "four"]
    assert [t for _, t in rest] == pytest.approx([4 / 19 * 0.05, 8 / 19 * 0.05, 14 / 19 * 0.05])


def test_more_audio_than_the_text_allows_lowers_the_rate() -> None:
    clock = StartClock(SpeechRate(100.0))  # far too fast a prior
    clock.add_text("first second", boundary=True)  # 13 positions: at 100/s all due by 0.13 s
    words = clock.add_audio(0.05)
    assert words == [("first", 0.0)]
    # 1.3 s of audio for 13 characters: the real rate is at most 10/s, so "second" is due at 0.6 s
    assert clock.add_audio(1.25) == [("second", pytest.approx(0.6))]


def test_streamed_tokens_complete_a_word_only_at_whitespace() -> None:
    clock = StartClock(SpeechRate(1000.0))
    clock.add_text("Hel")
    clock.add_text("lo wor")
    assert clock.add_audio(1.0) == [("Hello", 0.0)]
    clock.add_text("ld")
    assert clock.add_audio(1.0) == []  # "world" may still go on
    assert [w for w, _ in clock.end_segment()] == ["world"]


def test_segments_follow_each_other_and_calibrate_the_rate() -> None:
    rate = SpeechRate(10.0)
    clock = StartClock(rate)
    clock.add_text("abc defgh", boundary=True)  # 10 positions
    clock.add_audio(2.0)
    clock.end_segment()
    assert rate.chars_per_second == pytest.approx(5.0)
    clock.add_text("xy zz", boundary=True)
    words = clock.add_audio(0.1)
    assert words == [("xy", pytest.approx(2.0))]  # the second segment starts after the first one's audio


@given(
    text=st.lists(st.text(alphabet="ab .,", min_size=1, max_size=8), min_size=1, max_size=12),
    chunks=st.lists(st.floats(min_value=0.001, max_value=0.5), min_size=1, max_size=30),
    prior=st.floats(min_value=2.0, max_value=40.0),
)
def test_every_word_exactly_once_in_order_with_rising_times(
    text: list[str], chunks: list[float], prior: float
) -> None:
    clock = StartClock(SpeechRate(prior))
    out: list[tuple[str, float]] = []
    for i, piece in enumerate(text):
        clock.add_text(piece)
        out += clock.add_audio(chunks[i % len(chunks)])
    for c in chunks:
        out += clock.add_audio(c)
    out += clock.end_segment()
    assert [w for w, _ in out] == "".join(text).split()
    times = [t for _, t in out]
    assert times == sorted(times)
    total = sum(chunks) + sum(chunks[i % len(chunks)] for i in range(len(text)))
    # (1e-9: the clock sums the same floats in another order; a start can come out an ulp past this sum)
    assert all(0.0 <= t <= total + 1e-9 for t in times)


def test_restart_times_the_next_text_from_zero() -> None:
    clock = StartClock(SpeechRate(10.0))
    clock.add_text("aaaa bbbb", boundary=True)
    assert clock.add_audio(0.2) == [("aaaa", 0.0)]
    clock.restart()  # the audio context went away with "bbbb" still owed
    clock.add_text("cccc dddd", boundary=True)
    assert clock.add_audio(0.1) == [("cccc", 0.0)]
    assert [w for w, _ in clock.end_segment()] == ["dddd"]


# --- release="end" (the LiveKit adapter's view: TimedWord with start and end) --------------------------------------------------------------------------------------------


def test_words_concatenate_back_to_the_text_and_end_with_the_audio() -> None:
    t = EndClock(14.0)
    t.add_text("Hello there. ")
    t.add_text("How are you today? ")
    words = t.on_audio(0.5) + t.on_audio(1.0)
    rest, measured = t.finish()
    words += rest
    assert "".join(w.text for w in words) == "Hello there. How are you today? "
    assert [w.text for w in words] == ["Hello ", "there. ", "How ", "are ", "you ", "today? "]
    assert words[0].start == 0.0
    for a, b in itertools.pairwise(words):
        assert a.end == pytest.approx(b.start)
        assert a.start <= a.end
    assert words[-1].end == pytest.approx(1.5)
    assert measured == pytest.approx(t.weight_total / 1.5)


def test_words_are_released_only_within_the_audio_received() -> None:
    t = EndClock(10.0)
    t.add_text("one two three four five ")  # weights 4 4 6 5 5 -> ends 0.4 0.8 1.4 1.9 2.4 at 10 cps
    assert t.on_audio(0.3) == []
    first = t.on_audio(0.2)  # 0.5 s received
    assert [w.text for w in first] == ["one "]
    more = t.on_audio(1.0)  # 1.5 s
    assert [w.text for w in more] == ["two ", "three "]
    assert all(w.end <= 1.5 + 1e-9 for w in first + more)
    # the last word of the text sent so far is held, however much audio arrives
    assert [w.text for w in t.on_audio(5.0)] == ["four "]
    rest, _ = t.finish()
    assert [w.text for w in rest] == ["five "]
    assert rest[0].end == pytest.approx(6.5)


def test_rate_is_capped_by_text_sent_over_audio_received() -> None:
    # 13 weighted chars rendered as 2.6 s of audio: the true rate is at most 5 cps, slower than the prior.
    t = EndClock(20.0)
    t.add_text("Hello there. ")
    words = t.on_audio(2.6)
    assert t.rate == pytest.approx(13 / 2.6)
    assert [w.text for w in words] == ["Hello "]
    assert words[-1].end == pytest.approx(6 / (13 / 2.6))
    # more text releases the held word; the next sentence starts where the first one ends
    t.add_text("Bye. ")
    words = t.on_audio(0.0)
    assert [w.text for w in words] == ["there. "]
    assert words[-1].end == pytest.approx(2.6)
    words = t.on_audio(1.0)
    rest, _ = t.finish()
    assert (words + rest)[0].start == pytest.approx(2.6)


def test_finish_without_audio_gives_zero_length_words() -> None:
    t = EndClock()
    t.add_text("no audio at all ")
    words, measured = t.finish()
    assert measured is None
    assert [w.text for w in words] == ["no ", "audio ", "at ", "all "]
    assert all(w.start == w.end == 0.0 for w in words)


def test_leading_whitespace_is_kept() -> None:
    t = EndClock()
    t.add_text("  ")
    t.add_text(" Hi there")
    words, _ = t.finish()
    assert "".join(w.text for w in words) == "   Hi there"


@settings(max_examples=60, deadline=None)
@given(
    sentences=st.lists(st.text(alphabet="abc .,!", min_size=1, max_size=40), min_size=1, max_size=6),
    chunks=st.lists(st.floats(min_value=0.001, max_value=0.5), min_size=0, max_size=30),
    prior=st.floats(min_value=1.0, max_value=60.0),
)
def test_timing_properties(sentences: list[str], chunks: list[float], prior: float) -> None:
    t = EndClock(prior)
    words = []
    for i, s in enumerate(sentences):
        t.add_text(s)
        for c in chunks[i :: len(sentences)]:
            words += t.on_audio(c)
            assert all(w.end <= t.audio_seconds + 1e-6 for w in words)
    rest, _ = t.finish()
    words += rest
    text = "".join(sentences)
    if text.strip():  # whitespace after the last released word may be dropped, nothing else
        assert "".join(w.text for w in words).rstrip() == text.rstrip()
    starts = [w.start for w in words]
    assert starts == sorted(starts)
    assert all(w.end >= w.start for w in words)
    if words and t.audio_seconds > 0:
        assert words[-1].end == pytest.approx(t.audio_seconds)


# --- scripts without spaces ------------------------------------------------------------------------------


def units(text: str) -> list[str]:
    clock = WordClock(release="start")
    clock.add_text(text, boundary=True)
    return [w.text for w in clock.end_segment()]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("你好，世界。", ["你", "好，", "世", "界。"]),
        ("我用Python写代码", ["我", "用", "Python", "写", "代", "码"]),
        ("2024年", ["2024", "年"]),
        ("「你好」", ["「你", "好」"]),  # an opening mark joins the character after it
        ("こんにちは。", ["こ", "ん", "に", "ち", "は。"]),
        ("カタカナー", ["カ", "タ", "カ", "ナ", "ー"]),
        ("สวัสดี", ["ส", "วั", "ส", "ดี"]),  # Thai: combining vowel marks stay with their letter
        ("Hello, 世界 and you", ["Hello, ", "世", "界 ", "and ", "you"]),
        ("안녕하세요 세계", ["안녕하세요 ", "세계"]),  # Korean is written with spaces: words
    ],
)
def test_units_of_scripts_without_spaces(text: str, expected: list[str]) -> None:
    assert units(text) == expected


def test_cjk_weights_follow_the_syllable_rate() -> None:
    clock = WordClock(SpeechRate(15.0), release="start")
    clock.add_text("你好", boundary=True)  # ideographs weigh 3: 6 in all
    clock.add_text("かな", boundary=True)  # kana weigh 2: 4
    clock.add_text("ab", boundary=True)  # a word: 2 + 1 for its gap
    assert clock.weight_total == 13
    assert clock.unspaced is True
    latin = WordClock()
    latin.add_text("plain words only")
    assert latin.unspaced is False


def test_streamed_cjk_tokens_release_each_character_at_its_start() -> None:
    clock = StartClock(SpeechRate(15.0))
    for token in ("你好", "，很", "高兴"):
        clock.add_text(token)
    # 你 0, 好， 3, 很 7, 高 10 (weights 3, 3+1, 3, 3): due at 0, 0.2, 0.47, 0.67 s; 兴 may still get a mark
    assert clock.add_audio(0.5) == [("你", 0.0), ("好，", pytest.approx(0.2)), ("很", pytest.approx(7 / 15))]
    assert [w for w, _ in clock.add_audio(5.0)] == ["高"]
    assert [w for w, _ in clock.end_segment()] == ["兴"]


@settings(max_examples=60, deadline=None)
@given(
    pieces=st.lists(st.text(alphabet="你好。ab ,こ", min_size=1, max_size=6), min_size=1, max_size=10),
    chunks=st.lists(st.floats(min_value=0.001, max_value=0.5), min_size=1, max_size=20),
    release=st.sampled_from(["start", "end"]),
)
def test_mixed_scripts_concatenate_back_and_never_run_ahead_of_the_audio(
    pieces: list[str], chunks: list[float], release: str
) -> None:
    clock = WordClock(SpeechRate(15.0), release=release)  # type: ignore[arg-type]
    out: list[TimedWord] = []
    for i, piece in enumerate(pieces):
        clock.add_text(piece)
        out += clock.add_audio(chunks[i % len(chunks)])
        assert all(w.end <= clock.audio_seconds + 1e-6 and w.start <= w.end for w in out)
    out += clock.end_segment()
    assert "".join(w.text for w in out).rstrip() == "".join(pieces).rstrip()
    starts = [w.start for w in out]
    assert starts == sorted(starts)
    assert all(w.text.strip() for w in out)


def test_release_mode_is_checked() -> None:
    with pytest.raises(ValueError, match="release must be 'start' or 'end'"):
        WordClock(release="middle")  # type: ignore[arg-type]


class _AlwaysChecking(WordClock):
    """The reference: the full due check on every chunk (no skipping while nothing can be due)."""

    def add_audio(self, seconds: float) -> list[TimedWord]:
        self._quiet_until = 0.0
        return super().add_audio(seconds)


_STEP = st.one_of(
    st.tuples(
        st.just("text"), st.sampled_from(["Hello ", "there, ", "wor", "ld. ", "用Python写", "  ", "ok"])
    ),
    st.tuples(st.just("audio"), st.floats(min_value=0.0, max_value=0.5)),
    st.tuples(st.just("end"), st.just(0.0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_STEP, max_size=40), st.sampled_from(["start", "end"]))
def test_skipping_quiet_chunks_releases_exactly_what_the_full_check_does(steps, release) -> None:
    fast, ref = WordClock(SpeechRate(), release=release), _AlwaysChecking(SpeechRate(), release=release)
    for kind, value in steps:
        if kind == "text":
            fast.add_text(value)
            ref.add_text(value)
        elif kind == "audio":
            assert fast.add_audio(value) == ref.add_audio(value)
            assert fast.rate == ref.rate
        else:
            assert fast.end_segment() == ref.end_segment()
    assert fast.end_segment() == ref.end_segment()


# --- pieces and complete_text (heard text before the voice is calibrated) ---------------------------------


def test_complete_text_times_a_finished_piece_exactly_and_calibrates_the_rest() -> None:
    rate = SpeechRate(15.0)
    clock = WordClock(rate, release="start", pieces=True)
    first, second = "Sure, I can help you. ", "This is a test. "
    clock.add_text(first, boundary=True)
    clock.add_text(second, boundary=True)
    # the voice is slower than the prior (22 weight in 1.9 s): all audio so far is the first piece's, so
    # the cap is its weight, and nothing of the second piece is released before the first one's end
    words = clock.add_audio(1.9)
    assert [w.text for w in words] == ["Sure, ", "I ", "can ", "help ", "you. "]
    assert clock.rate == pytest.approx(22 / 1.9)
    # every unit of it was out already; the next piece's first unit starts where its audio does
    [this] = clock.complete_text(len(first), 1.9)
    assert rate.chars_per_second == pytest.approx(22 / 1.9)  # calibrated mid-turn
    assert this.text == "This " and this.start == pytest.approx(1.9)
    [is_] = clock.add_audio(0.5)
    assert is_.start == pytest.approx(1.9 + 5 / (22 / 1.9))  # timed at the voice's real rate


def test_complete_text_releases_the_held_units_of_a_piece_by_their_exact_share() -> None:
    clock = WordClock(SpeechRate(10.0), release="start", pieces=True)
    clock.add_text("aaaa bbbb ", boundary=True)  # weight 10
    clock.add_text("cc ", boundary=True)
    assert [w.text for w in clock.add_audio(0.25)] == ["aaaa "]  # "bbbb " starts at 0.5 s by the prior
    words = clock.complete_text(len("aaaa bbbb "), 0.25)  # a fast voice: the piece took 0.25 s
    assert [(w.text, w.start, w.end) for w in words] == [("bbbb ", 0.125, 0.25), ("cc ", 0.25, 0.25)]
    # a report for text not added yet, or for audio not received yet, changes nothing
    assert clock.complete_text(1000, 0.3) == [] and clock.complete_text(len("aaaa bbbb cc "), 5.0) == []


def test_complete_rendered_applies_a_turns_reports_once_their_audio_is_in() -> None:
    clock = WordClock(SpeechRate(10.0), release="start", pieces=True)
    clock.add_text("aaaa bbbb ", boundary=True)
    clock.add_text("cc ", boundary=True)
    reports = [(10, 0.3)]
    assert [w.text for w in clock.add_audio(0.2) + clock.complete_rendered(reports)] == ["aaaa "]
    words = clock.add_audio(0.1) + clock.complete_rendered(reports)  # now the audio is in
    assert [w.text for w in words] == ["bbbb ", "cc "]
    assert clock.complete_rendered(reports) == []  # applied once
    clock.restart()  # a new time base: the turn's reports no longer match it
    clock.add_text("dd ", boundary=True)
    assert clock.complete_rendered([(10, 0.3), (13, 0.4)]) == []


def test_releasing_at_the_end_the_word_that_ends_an_open_piece_waits_for_its_reported_end() -> None:
    # a slow voice (11 weight/s against the prior 15): by the prior, "you. " ends at 22/15 s, within the audio
    # received long before the piece does; its audio ends with the piece, so it waits for the piece's report
    clock = WordClock(SpeechRate(15.0), release="end", pieces=True)
    first = "Sure, I can help you. "
    clock.add_text(first)
    clock.add_text("This is a test. ")
    words = [w for _ in range(20) for w in clock.add_audio(0.1)]  # 2 s, the piece not reported yet
    assert [w.text for w in words] == ["Sure, ", "I ", "can ", "help "]
    [you] = clock.complete_text(len(first), 2.0)
    assert you.text == "you. " and you.end == pytest.approx(2.0)  # ends where the piece's audio does
