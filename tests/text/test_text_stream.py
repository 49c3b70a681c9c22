"""Streaming: each piece goes out at once unless it may end inside something a rule reads whole."""

from __future__ import annotations

from ttsbridge.text import TextNormalizer
from ttsbridge.text.stream import StreamNormalizer, complete_until

EN = TextNormalizer()


def test_a_number_cut_mid_token_waits_for_the_rest() -> None:
    stream = EN.stream()
    first = stream.push("Your total is $1,")  # (with the word before it, which a rule may read with it)
    assert first.spoken == "Your total " and stream.held == "is $1,"
    second = stream.push("234.50, thanks. ")
    assert second.spoken == "is one thousand two hundred thirty-four dollars and fifty cents, thanks. "
    assert second.written == "is $1,234.50, thanks. "
    assert stream.held == ""


def test_a_sentence_never_waits() -> None:
    stream = EN.stream()
    for sentence in [
        "Hello there. ",
        "It costs $5. ",
        "Call +1 (415) 555-0134! ",
        "Meet at 3:30 pm, ",
        "ok? ",
    ]:
        out = stream.push(sentence)
        assert out.written == sentence and stream.held == ""


def test_a_clause_cut_inside_a_phone_number_holds_the_number_only() -> None:
    stream = EN.stream()
    assert stream.push("Please call +1 415 ").spoken == "Please "
    assert stream.held == "call +1 415 "
    out = stream.push("555 0134 now. ")
    assert out.spoken == "call plus one, four one five, five five five, zero one three four now. "


def test_a_date_cut_after_its_cue_word_is_read_whole() -> None:
    stream = EN.stream()  # a clause cut at its length limit right after the date
    assert stream.push("Pay it by 12/05 ").spoken == "Pay it "
    assert stream.push("or later. ").spoken == "by December fifth or later. "


def test_an_acronym_cut_mid_word_waits_and_a_plain_word_does_not() -> None:
    stream = EN.stream()
    assert stream.push("The AP").spoken == "The " and stream.held == "AP"
    assert stream.push("Is are up. ").spoken == "A P Is are up. "
    assert stream.push("Hel").spoken == "Hel" and stream.held == ""


def test_flush_releases_what_was_held() -> None:
    stream = EN.stream()
    assert stream.push("Total: 42").spoken == "Total: "  # (": " closes the word before)
    assert stream.flush().spoken == "forty-two"
    assert stream.flush().spoken == ""


def test_off_passes_text_through() -> None:
    stream = StreamNormalizer(None)
    assert stream.push("$1,").spoken == "$1," and stream.held == ""
    assert not stream.enabled


def test_complete_until() -> None:
    assert complete_until("Hello there. ") == 13
    assert complete_until("I have 5, ") == 10
    assert complete_until("I have 5 ") == 2
    assert complete_until("word") == 4
    assert complete_until("the $") == 0
    assert complete_until("API") == 0
    assert complete_until("") == 0
