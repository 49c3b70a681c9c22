"""Pure-function units of the Pipecat adapter: word timing, token coalescing, error classification."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pipecat.utils.errors import ErrorCategory

from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError
from ttsbridge.pipecat._base import _TokenCoalescer
from ttsbridge.pipecat._errors import classify
from ttsbridge.pipecat._words import SpeechRate, WordClock

# --- word timing ---------------------------------------------------------------------------------------------


def test_words_wait_for_the_audio_that_carries_them() -> None:
    clock = WordClock(SpeechRate(10.0))  # 10 chars/s: "aaaa bbbb cccc" -> starts 0.0, 0.5, 1.0
    clock.add_text("aaaa bbbb cccc", boundary=True)
    assert clock.add_audio(0.1) == [("aaaa", 0.0)]
    assert clock.add_audio(0.3) == []
    assert clock.add_audio(0.1) == [("bbbb", 0.5)]
    assert clock.words_pending == 1
    # the rest at the end, timed by the real duration (1.5 s for 15 positions: "cccc" at 10/15)
    assert clock.add_audio(1.0) == [("cccc", 1.0)]
    assert clock.end_segment() == []


def test_end_of_segment_times_the_rest_by_its_share_of_the_characters() -> None:
    clock = WordClock(SpeechRate(5.0))
    clock.add_text("one two three four", boundary=True)  # 19 positions with the boundary
    assert clock.add_audio(0.05) == [("one", 0.0)]
    rest = clock.end_segment()
    assert [w for w, _ in rest] == ["two", "three", "four"]
    assert [t for _, t in rest] == pytest.approx([4 / 19 * 0.05, 8 / 19 * 0.05, 14 / 19 * 0.05])


def test_more_audio_than_the_text_allows_lowers_the_rate() -> None:
    clock = WordClock(SpeechRate(100.0))  # far too fast a prior
    clock.add_text("first second", boundary=True)  # 13 positions: at 100/s all due by 0.13 s
    words = clock.add_audio(0.05)
    assert words == [("first", 0.0)]
    # 1.3 s of audio for 13 characters: the real rate is at most 10/s, so "second" is due at 0.6 s
    assert clock.add_audio(1.25) == [("second", pytest.approx(0.6))]


def test_streamed_tokens_complete_a_word_only_at_whitespace() -> None:
    clock = WordClock(SpeechRate(1000.0))
    clock.add_text("Hel")
    clock.add_text("lo wor")
    assert clock.add_audio(1.0) == [("Hello", 0.0)]
    clock.add_text("ld")
    assert clock.add_audio(1.0) == []  # "world" may still go on
    assert [w for w, _ in clock.end_segment()] == ["world"]


def test_segments_follow_each_other_and_calibrate_the_rate() -> None:
    rate = SpeechRate(10.0)
    clock = WordClock(rate)
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
    clock = WordClock(SpeechRate(prior))
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
    assert all(
        0.0 <= t <= sum(chunks) + sum(chunks[i % len(chunks)] for i in range(len(text))) for t in times
    )


# --- token coalescing ----------------------------------------------------------------------------------------


def test_tokens_are_released_at_clause_ends() -> None:
    c = _TokenCoalescer()
    assert c.push("Hel") == ""
    assert c.push("lo, wor") == "Hello, "
    assert c.push("ld. How") == "world. "
    assert c.push(" are you") == ""
    assert c.flush() == "How are you"
    assert c.flush() == ""


def test_long_clauses_are_cut_at_a_word_boundary() -> None:
    c = _TokenCoalescer(max_chars=20)
    out = c.push("one two three four five six")
    assert out == "one two three four five "
    assert c.flush() == "six"


@given(st.lists(st.text(alphabet="ab ,.", max_size=10), max_size=30))
def test_coalescing_loses_and_reorders_nothing(tokens: list[str]) -> None:
    c = _TokenCoalescer(max_chars=12)
    out = "".join(c.push(t) for t in tokens) + c.flush()
    assert out == "".join(tokens)


# --- errors ----------------------------------------------------------------------------------------------------


def api_error(code: str, status: int | None) -> TTSAPIError:
    return TTSAPIError("x", provider="nineninesix", error_code=code, status_code=status)


@pytest.mark.parametrize(
    ("code", "status", "category", "fatal"),
    [
        ("unauthorized", 401, ErrorCategory.AUTHENTICATION, True),
        # QUOTA is recoverable in Pipecat 1.14: an account can be topped up, so not fatal
        ("insufficient_credits", 402, ErrorCategory.QUOTA, False),
        ("payment_required", 402, ErrorCategory.QUOTA, False),
        ("voice_not_found", 404, ErrorCategory.INVALID_REQUEST, True),
        ("unknown_model", 400, ErrorCategory.INVALID_REQUEST, True),
        ("model_not_found", None, ErrorCategory.INVALID_REQUEST, True),
        ("unsupported_encoding", 400, ErrorCategory.INVALID_REQUEST, True),
        ("invalid_sample_rate", 400, ErrorCategory.INVALID_REQUEST, True),
        ("concurrent_limit", 429, ErrorCategory.RATE_LIMIT, False),
        ("rate_limited", 429, ErrorCategory.RATE_LIMIT, False),
        ("generation_failed", 500, ErrorCategory.SERVER, False),
        ("not_initialized", 503, ErrorCategory.SERVER, False),
        ("upstream_unavailable", 502, ErrorCategory.SERVER, False),
        ("internal_error", None, ErrorCategory.SERVER, False),
        ("quota_exceeded", None, ErrorCategory.QUOTA, False),  # Kitta: per session; the next starts afresh
        ("invalid_state", None, ErrorCategory.UNKNOWN, False),
        ("forbidden", 403, ErrorCategory.AUTHORIZATION, True),
        ("context_not_found", 404, ErrorCategory.UNKNOWN, False),
        ("missing_context_id", 400, ErrorCategory.UNKNOWN, False),
    ],
)
def test_api_error_classification(
    code: str, status: int | None, category: ErrorCategory, fatal: bool
) -> None:
    verdict = classify(api_error(code, status))
    assert verdict.category is category
    assert verdict.fatal is fatal
    # a non-fatal error must not carry a category Pipecat treats as permanent
    assert fatal or not verdict.category.is_permanent


def test_transport_errors_are_not_fatal() -> None:
    for exc in (TTSConnectionError("dropped"), TTSTimeoutError("slow"), ConnectionResetError()):
        verdict = classify(exc)
        assert verdict.category is ErrorCategory.CONNECTIVITY and not verdict.fatal
    assert classify(RuntimeError("?")).fatal is False
    assert classify(TTSInvalidOptionError("voice", "", "a voice id")).fatal is True


def test_restart_times_the_next_text_from_zero() -> None:
    clock = WordClock(SpeechRate(10.0))
    clock.add_text("aaaa bbbb", boundary=True)
    assert clock.add_audio(0.2) == [("aaaa", 0.0)]
    clock.restart()  # the audio context went away with "bbbb" still owed
    clock.add_text("cccc dddd", boundary=True)
    assert clock.add_audio(0.1) == [("cccc", 0.0)]
    assert [w for w, _ in clock.end_segment()] == ["dddd"]
