"""The English spoken form, class by class (ttsbridge.text): what is read, and what is left alone."""

from __future__ import annotations

import pytest

from ttsbridge.text import TextNormalizer

EN = TextNormalizer()

CASES = {
    # cardinals, decimals, signs, ids
    "I have 42 apples.": "I have forty-two apples.",
    "It has 1,234,567 rows.": "It has one million two hundred thirty-four thousand five hundred sixty-seven rows.",
    "Pi is 3.14.": "Pi is three point one four.",
    "It is -5 and +3.": "It is minus five and plus three.",
    "Agent 007, id 1234567, 1000000 users.": "Agent zero zero seven, id one two three four five six seven, one million users.",
    "Add 1/2 cup and 3/4 of it.": "Add one half cup and three quarters of it.",
    # ordinals
    "You are 1st, she is 22nd, he is 103rd.": "You are first, she is twenty-second, he is one hundred third.",
    # currency: symbols and ISO codes, cents, magnitudes, negatives
    "Your total is $1,234.50.": "Your total is one thousand two hundred thirty-four dollars and fifty cents.",
    "It costs $1 or $0.99.": "It costs one dollar or ninety-nine cents.",
    "Pay USD 12.50 or 30 CHF.": "Pay twelve dollars and fifty cents or thirty Swiss francs.",
    "Raised $1.2M, then $3 billion.": "Raised one million two hundred thousand dollars, then three billion dollars.",
    "It was £3.50.": "It was three pounds sterling and fifty pence.",
    # percentages
    "Up 45% or 3.5%.": "Up forty-five percent or three point five percent.",
    # phone numbers: E.164 and national, digit by digit, grouped
    "Call +1 (415) 555-0134.": "Call plus one, four one five, five five five, zero one three four.",
    "Call (415) 555-0134.": "Call four one five, five five five, zero one three four.",
    "Call 4155550134.": "Call four one five, five five five, zero one three four.",
    "Call +44 20 7946 0958.": "Call plus four four, two zero, seven nine four six, zero nine five eight.",
    # emails and URLs
    "Email help@acme.io now.": "Email help at acme dot i o now.",
    "Email John.Doe42@mail.example.com.": "Email John dot Doe four two at mail dot example dot com.",
    "See https://acme.io/docs?x=1 or www.example.com.": "See acme dot i o slash docs or W W W dot example dot com.",
    # dates and times
    "Pay by 12/05.": "Pay by December fifth.",
    "On 12/05/2025.": "On December fifth, twenty twenty-five.",
    "On 2025-12-05.": "On December fifth, twenty twenty-five.",
    "On March 3rd, 2024.": "On March third, twenty twenty-four.",
    "On 5 May 2025.": "On May fifth, twenty twenty-five.",
    "At 3:30 pm.": "At three thirty p m.",
    "At 10am, 9:05 and 15:00.": "At ten a m, nine oh five and fifteen hundred.",
    "At 7 p.m. sharp.": "At seven p m sharp.",
    # units
    "Drive 5 km at 60 mph.": "Drive five kilometers at sixty miles per hour.",
    "It is 20°C and 3.5 GB, 1 lb.": "It is twenty degrees Celsius and three point five gigabytes, one pound.",
    "5in wide, 5 in the box.": "five inches wide, five in the box.",
    # years and decades
    "In 1999, since 1066, the 1980s.": "In nineteen ninety-nine, since ten sixty-six, the nineteen eighties.",
    # ranges
    "Pages 10-20, 2019–2024, $5-10, 9am-5pm, 5-10%.": (
        "Pages ten to twenty, twenty nineteen to twenty twenty-four, five dollars to ten dollars,"
        " nine a m to five p m, five to ten percent."
    ),
    # acronyms (and what is not one)
    "The API, the HTTP APIs, OK.": "The A P I, the H T T P A P Is, O K.",
    "World War II, THIS IS VERY IMPORTANT NEWS.": "World War II, THIS IS VERY IMPORTANT NEWS.",
    # symbols
    "Tom & Jerry, R&D, #1 fan.": "Tom and Jerry, R and D, number one fan.",
    # markdown out, emoji out, curly quotes folded
    "**Bold** and *italic* and `code` and [a link](https://x.io).": "Bold and italic and code and a link.",
    "# Title\n\n- item one\n- item two\n": "Title\n\nitem one\nitem two\n",
    "It’s the “best” 🎉 day!": 'It\'s the "best"  day!',
    # left alone
    "COVID-19, mp3, B2B, 4G, version 2.0.1, e.g. this.": "COVID-19, mp3, B2B, 4G, version 2.0.1, e.g. this.",
    "Hello there, how are you?": "Hello there, how are you?",
}


@pytest.mark.parametrize(("written", "spoken"), list(CASES.items()), ids=list(range(len(CASES))))
def test_english_reads_right(written: str, spoken: str) -> None:
    out = EN.normalize(written)
    assert out.spoken == spoken
    assert out.written == written  # the map covers the LLM's text exactly


def test_every_rewritten_span_is_whole_words() -> None:
    for written in CASES:
        out = EN.normalize(written)
        at = 0
        for span in out.spans:
            if span.rewritten:
                assert at == 0 or written[at - 1].isspace(), (written, span)
                end = at + len(span.written)
                assert end == len(written) or written[end].isspace(), (written, span)
                assert span.written.strip() == span.written
            at += len(span.written)


def test_a_text_with_nothing_to_rewrite_is_one_span() -> None:
    out = EN.normalize("hello there, how are you today?")
    assert len(out.spans) == 1 and not out.rewritten


def test_the_map_counts_a_rewritten_span_whole() -> None:
    out = EN.normalize("Pay $5 now.")
    assert out.spoken == "Pay five dollars now."
    assert out.written_for(len("Pay ")) == len("Pay ")
    assert out.written_for(len("Pay five dol")) == len("Pay ")  # inside the span: none of it
    assert out.written_for(len("Pay five dollars")) == len("Pay $5")
    assert out.spoken_for(len("Pay $")) == len("Pay ")
    assert out.spoken_for(len("Pay $5 n")) == len("Pay five dollars n")


def test_unknown_languages_get_the_language_neutral_rules() -> None:
    fr = TextNormalizer(language="fr")
    out = fr.normalize("Il a **42** ans 🎉 “oui”.")
    assert out.spoken == 'Il a 42 ans  "oui".'


def test_each_class_can_be_turned_off() -> None:
    from ttsbridge.text import TextOptions

    plain = TextNormalizer(options=TextOptions(numbers=False, markdown=False))
    assert plain.normalize("**5** apples").spoken == "**5** apples"


def test_emulator_directives_are_sent_as_written() -> None:
    text = "Hello 5 times. [[error:code:2]]"
    assert EN.normalize(text).spoken == "Hello five times. [[error:code:2]]"


def test_bad_arguments_are_refused_naming_the_field() -> None:
    from ttsbridge.errors import TTSInvalidOptionError
    from ttsbridge.text import normalizer_from

    with pytest.raises(TTSInvalidOptionError, match="language"):
        TextNormalizer(language="")
    with pytest.raises(TTSInvalidOptionError, match="normalize_text"):
        normalizer_from("yes")


def test_missing_libraries_are_named_when_the_normalizer_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import ttsbridge.text
    from ttsbridge.errors import TTSInvalidOptionError

    monkeypatch.setattr(ttsbridge.text, "_LIBRARIES", ("num2words", "no_such_library_31"))
    with pytest.raises(TTSInvalidOptionError, match=r"normalize_text.*ttsbridge\[text\].*no_such_library_31"):
        ttsbridge.text.normalizer_from(True)
    assert ttsbridge.text.normalizer_from(False) is None
