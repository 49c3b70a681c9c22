"""Pure-function tests of the LiveKit adapter: word-timing estimate and error mapping."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from livekit.agents import APIConnectionError, APIError, APIStatusError, APITimeoutError

from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.livekit_adapter import WordTimer, _Watchdog, to_api_error

KEY = "sk_996_secretsecret123"


# --- word timing --------------------------------------------------------------------------------------------


def test_words_concatenate_back_to_the_text_and_end_with_the_audio() -> None:
    t = WordTimer(chars_per_second=14.0)
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
    t = WordTimer(chars_per_second=10.0)
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
    t = WordTimer(chars_per_second=20.0)
    t.add_text("Hello there. ")
    words = t.on_audio(2.6)
    assert t.rate() == pytest.approx(13 / 2.6)
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
    t = WordTimer()
    t.add_text("no audio at all ")
    words, measured = t.finish()
    assert measured is None
    assert [w.text for w in words] == ["no ", "audio ", "at ", "all "]
    assert all(w.start == w.end == 0.0 for w in words)


def test_leading_whitespace_is_kept() -> None:
    t = WordTimer()
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
    t = WordTimer(prior)
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


# --- watchdog -----------------------------------------------------------------------------------------------


def test_watchdog_owes_after_send_and_after_end_only() -> None:
    w = _Watchdog(5.0)
    assert w.remaining() is None
    w.on_send()
    assert w.remaining() is not None and 0 < w.remaining() <= 5.0  # type: ignore[operator]
    w.on_audio()
    assert w.remaining() is None  # caught up while the input is open: nothing owed
    w.on_end()
    assert w.remaining() is not None
    w.on_audio()
    assert w.remaining() is not None  # after the end, every gap is bounded


# --- errors -------------------------------------------------------------------------------------------------


def _api_error(code: str, status: int | None, retryable: bool) -> TTSAPIError:
    return TTSAPIError(
        f"failed on wss://x/tts/websocket?api_key={KEY}",
        provider="nineninesix",
        error_code=code,
        status_code=status,
        retryable=retryable,
        request_id="req_1",
        context_id="ctx_1",
    )


@pytest.mark.parametrize(
    ("code", "status", "retryable", "expect_retryable"),
    [
        ("generation_failed", 500, True, True),
        ("concurrent_limit", 429, True, True),
        ("voice_not_found", 404, False, False),
        ("not_initialized", 503, True, True),
        ("rate_limited", None, True, True),
    ],
)
def test_api_error_maps_to_status_error(
    code: str, status: int | None, retryable: bool, expect_retryable: bool
) -> None:
    err = to_api_error(_api_error(code, status, retryable), audio_pushed=False, secrets=(KEY,))
    assert isinstance(err, APIStatusError)
    assert err.status_code == (status if status is not None else -1)
    assert err.request_id == "req_1"
    assert err.retryable is expect_retryable
    assert err.body["error_code"] == code  # type: ignore[index]
    assert err.body["context_id"] == "ctx_1"  # type: ignore[index]
    assert KEY not in str(err) and KEY not in repr(err)


def test_nothing_is_retryable_once_audio_was_pushed() -> None:
    for exc in (
        _api_error("generation_failed", 500, True),
        TTSConnectionError("dropped"),
        TTSTimeoutError("slow"),
        asyncio.TimeoutError(),
        APIConnectionError("x"),
    ):
        err = to_api_error(exc, audio_pushed=True)
        assert err.retryable is False, exc


def test_error_types() -> None:
    assert type(to_api_error(TTSConnectionError("x"), audio_pushed=False)) is APIConnectionError
    assert type(to_api_error(TTSTimeoutError("x"), audio_pushed=False)) is APITimeoutError
    assert type(to_api_error(asyncio.TimeoutError(), audio_pushed=False)) is APITimeoutError
    assert to_api_error(TTSConnectionError("x"), audio_pushed=False).retryable is True
    bad = to_api_error(TTSInvalidOptionError("voice", "", "an id"), audio_pushed=False)
    assert type(bad) is APIError and bad.retryable is False
    other = to_api_error(TTSBridgeError("turn is over", retryable=False), audio_pushed=False)
    assert type(other) is APIError and other.retryable is False
    bug = to_api_error(RuntimeError(f"boom {KEY}"), audio_pushed=False)
    assert bug.retryable is False and KEY not in str(bug)


def test_connection_error_text_is_redacted() -> None:
    exc = ConnectionRefusedError(f"cannot connect to ws://127.0.0.1:1/tts/websocket?api_key={KEY}&x=1")
    err = to_api_error(exc, audio_pushed=False, secrets=(KEY,))
    assert isinstance(err, APIConnectionError)
    assert KEY not in str(err) and KEY not in repr(err)
