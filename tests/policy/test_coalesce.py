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
