"""Streaming: each piece goes out at once unless it may end inside something a rule reads whole."""

from __future__ import annotations

from ttsbridge.text import TextNormalizer
from ttsbridge.text.stream import StreamNormalizer, complete_until

EN = TextNormalizer()


def test_a_number_cut_mid_token_waits_for_the_rest() -> None:
    stream = EN.stream()
    first = stream.push("Your total is $1,")
    assert first.spoken == "Your total is " and stream.held == "$1,"
    second = stream.push("234.50, thanks. ")
    assert second.spoken == "one thousand two hundred thirty-four dollars and fifty cents, thanks. "
    assert second.written == "$1,234.50, thanks. "
    assert stream.held == ""


def test_a_sentence_never_waits() -> None:
    stream = EN.stream()
    for sentence in ["Hello there. ", "It costs $5. ", "Call +1 (415) 555-0134! ", "Meet at 3:30 pm, ", "ok? "]:
        out = stream.push(sentence)
        assert out.written == sentence and stream.held == ""


def test_a_clause_cut_inside_a_phone_number_holds_the_number_only() -> None:
    stream = EN.stream()
    assert stream.push("Please call +1 415 ").spoken == "Please call "
    assert stream.held == "+1 415 "
    out = stream.push("555 0134 now. ")
    assert out.spoken == "plus one, four one five, five five five, zero one three four now. "


def test_an_acronym_cut_mid_word_waits_and_a_plain_word_does_not() -> None:
    stream = EN.stream()
    assert stream.push("The AP").spoken == "The " and stream.held == "AP"
    assert stream.push("Is are up. ").spoken == "A P Is are up. "
    assert stream.push("Hel").spoken == "Hel" and stream.held == ""


def test_flush_releases_what_was_held() -> None:
    stream = EN.stream()
    assert stream.push("Total: 42").spoken == "Total: "
    assert stream.flush().spoken == "forty-two"
    assert stream.flush().spoken == ""


def test_off_passes_text_through() -> None:
    stream = StreamNormalizer(None)
    assert stream.push("$1,").spoken == "$1," and stream.held == ""
    assert not stream.enabled


def test_complete_until() -> None:
    assert complete_until("Hello there. ") == 13
    assert complete_until("I have 5, ") == 10
    assert complete_until("I have 5 ") == 7
    assert complete_until("word") == 4
    assert complete_until("the $") == 4
    assert complete_until("API") == 0
    assert complete_until("") == 0
