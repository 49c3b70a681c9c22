"""The token coalescer (:mod:`ttsbridge.policy.coalesce`), moved from the Pipecat adapter."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ttsbridge.policy.coalesce import TokenCoalescer

# --- token coalescing ----------------------------------------------------------------------------------------


def test_tokens_are_released_at_clause_ends() -> None:
    c = TokenCoalescer()
    assert c.push("Hel") == ""
    assert c.push("lo, wor") == "Hello, "
    assert c.push("ld. How") == "world. "
    assert c.push(" are you") == ""
    assert c.flush() == "How are you"
    assert c.flush() == ""


def test_long_clauses_are_cut_at_a_word_boundary() -> None:
    c = TokenCoalescer(max_chars=20)
    out = c.push("one two three four five six")
    assert out == "one two three four five "
    assert c.flush() == "six"


@given(st.lists(st.text(alphabet="ab ,.", max_size=10), max_size=30))
def test_coalescing_loses_and_reorders_nothing(tokens: list[str]) -> None:
    c = TokenCoalescer(max_chars=12)
    out = "".join(c.push(t) for t in tokens) + c.flush()
    assert out == "".join(tokens)


def test_cjk_clauses_end_at_full_width_marks_without_a_space() -> None:
    c = TokenCoalescer()
    assert c.push("你好") == ""
    assert c.push("，很高") == "你好，"
    assert c.push("兴。我们") == "很高兴。"
    assert c.flush() == "我们"


def test_long_cjk_text_without_marks_is_cut_after_a_character() -> None:
    c = TokenCoalescer(max_chars=6)
    assert c.push("我们明天见面abc") == "我们明天见面"  # a trailing Latin word may still go on
    assert c.flush() == "abc"


def test_a_long_word_without_any_boundary_is_held() -> None:
    c = TokenCoalescer(max_chars=5)
    assert c.push("https://example.com/x") == ""
    assert c.flush() == "https://example.com/x"


@given(st.lists(st.text(alphabet="ab 你。，.", max_size=10), max_size=30))
def test_coalescing_cjk_loses_and_reorders_nothing(tokens: list[str]) -> None:
    c = TokenCoalescer(max_chars=7)
    out = "".join(c.push(t) for t in tokens) + c.flush()
    assert out == "".join(tokens)
