"""The pronunciation lexicon: words and regexes -> respellings, per voice, from a file, changed at run time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.text import Lexicon, Pronunciation, TextNormalizer


def test_a_word_is_respelled_whole_and_its_written_form_kept() -> None:
    lex = Lexicon({"Nineninesix": "nine nine six", "SQL": "sequel"})
    out = TextNormalizer(lexicon=lex).normalize("Nineninesix speaks sql, not SQLite.")
    assert out.spoken == "nine nine six speaks sequel, not SQLite."
    rewritten = [(s.written, s.spoken, s.kind) for s in out.spans if s.rewritten]
    assert rewritten == [("Nineninesix", "nine nine six", "lexicon"), ("sql,", "sequel,", "lexicon")]


def test_the_lexicon_wins_over_the_rules() -> None:
    lex = Lexicon({"NASA": "nasa", "3M": "three em"})
    out = TextNormalizer(lexicon=lex).normalize("NASA and 3M and API.")
    assert out.spoken == "nasa and three em and A P I."


def test_case_sensitive_entries_and_regexes_with_groups() -> None:
    lex = Lexicon()
    lex.add("US", "U S", case_sensitive=True)
    lex.add(r"\bv(\d+)\b", r"version \1", regex=True)
    out = TextNormalizer(lexicon=lex).normalize("us in the US run v2")
    assert out.spoken == "us in the U S run version 2"


def test_entries_per_voice_win_over_global_ones() -> None:
    lex = Lexicon({"gif": "gif"})
    lex.add("gif", "jif", voice="narrator")
    norm = TextNormalizer(lexicon=lex)
    assert norm.normalize("a gif", voice="narrator").spoken == "a jif"
    assert norm.normalize("a gif", voice="other").spoken == "a gif"
    assert norm.normalize("a gif").spoken == "a gif"


def test_changes_at_run_time_apply_to_the_next_text() -> None:
    lex = Lexicon()
    norm = TextNormalizer(lexicon=lex)
    stream = norm.stream()
    assert stream.push("Acme rocks. ").spoken == "Acme rocks. "
    lex.add("Acme", "ack me")
    assert stream.push("Acme rocks. ").spoken == "ack me rocks. "
    assert lex.remove("Acme") and not lex.remove("Acme")
    assert stream.push("Acme rocks. ").spoken == "Acme rocks. "


def test_loaded_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "lexicon.json"
    path.write_text(
        json.dumps(
            {
                "entries": [
                    {"match": "Kitta", "say": "kit ah"},
                    {"match": r"\bQ(\d)\b", "say": r"quarter \1", "regex": True},
                ],
                "voices": {"anna": {"Kitta": "kitty"}},
            }
        )
    )
    lex = Lexicon.from_file(path)
    norm = TextNormalizer(lexicon=lex)
    assert norm.normalize("Kitta in Q3").spoken == "kit ah in quarter 3"
    assert norm.normalize("Kitta in Q3", voice="anna").spoken == "kitty in quarter 3"
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"Kitta": "KIT-tah"}))
    lex.load(flat, replace=True)
    assert [e.match for e in lex.entries] == ["Kitta"]
    assert norm.normalize("Kitta").spoken == "KIT-tah"


def test_phoneme_markup_is_used_only_when_a_provider_takes_it() -> None:
    lex = Lexicon([Pronunciation("Siobhan", "shiv awn", phonemes="ʃɪˈvɔːn")])
    assert TextNormalizer(lexicon=lex).normalize("Hi Siobhan").spoken == "Hi shiv awn"
    ssml = TextNormalizer(lexicon=lex, phonemes=lambda word, ipa: f'<phoneme ph="{ipa}">{word}</phoneme>')
    assert ssml.normalize("Hi Siobhan").spoken == 'Hi <phoneme ph="ʃɪˈvɔːn">Siobhan</phoneme>'


def test_bad_entries_are_refused_naming_the_field(tmp_path: Path) -> None:
    with pytest.raises(TTSInvalidOptionError, match="match"):
        Pronunciation("", "x")
    with pytest.raises(TTSInvalidOptionError, match="match"):
        Pronunciation("(", "x", regex=True)
    with pytest.raises(TTSInvalidOptionError, match="entry"):
        Lexicon([{"match": "a", "sya": "b"}])
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(TTSInvalidOptionError, match="lexicon file"):
        Lexicon.from_file(bad)
