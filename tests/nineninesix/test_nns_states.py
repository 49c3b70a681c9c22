"""The Nineninesix context state machine, tested as the table it is (h11's test_state.py is the model)."""

from __future__ import annotations

import pytest

from ttsbridge.nineninesix.states import TRANSITIONS, ContextState, Input, next_state

S, I = ContextState, Input  # noqa: E741

#: The whole machine, written out by hand: a change to the table must change this too.
EXPECTED = {
    (S.OPEN, I.END): S.ENDING,
    (S.ENDING, I.DONE): S.DONE,
    **{(s, i): S.CANCELLING for s in (S.OPEN, S.ENDING) for i in (I.CANCEL,)},
    **{(s, i): S.CANCELLED for s in (S.OPEN, S.ENDING) for i in (I.CANCEL_NOW, I.DONE_CANCELLED)},
    **{(s, I.TIMEOUT): S.FAILING for s in (S.OPEN, S.ENDING)},
    **{
        (s, i): S.FAILED
        for s in (S.OPEN, S.ENDING)
        for i in (I.ERROR, I.MALFORMED, I.LOST, I.NOT_FOUND, I.TIMEOUT_NOW)
    },
    **{
        (S.CANCELLING, i): S.CANCELLED
        for i in (I.DONE, I.DONE_CANCELLED, I.NOT_FOUND, I.ERROR, I.MALFORMED, I.LOST, I.ACK_TIMEOUT)
    },
    **{
        (S.FAILING, i): S.FAILED
        for i in (I.DONE, I.DONE_CANCELLED, I.NOT_FOUND, I.ERROR, I.MALFORMED, I.LOST, I.ACK_TIMEOUT)
    },
}


def test_the_table_is_exactly_the_expected_machine() -> None:
    assert TRANSITIONS == EXPECTED


@pytest.mark.parametrize("state", [s for s in ContextState if s.terminal])
def test_nothing_leaves_a_terminal_state(state: ContextState) -> None:
    assert all(next_state(state, i) is None for i in Input)


def test_a_done_before_our_end_ends_nothing() -> None:
    assert next_state(S.OPEN, I.DONE) is None  # the server's done comes only after continue: false


def test_every_live_state_can_always_end() -> None:
    # whatever happens to a live context, the connection being lost ends it: no turn can hang
    for state in ContextState:
        if not state.terminal:
            assert next_state(state, I.LOST) is not None and next_state(state, I.LOST).terminal  # type: ignore[union-attr]


def test_only_open_and_ending_accept_audio() -> None:
    assert {s for s in ContextState if s.accepts_audio} == {S.OPEN, S.ENDING}
    assert {s for s in ContextState if s.terminal} == {S.DONE, S.CANCELLED, S.FAILED}


def test_a_cancelled_context_ends_cancelled_and_a_timed_out_one_failed_whatever_the_answer() -> None:
    for i in Input:
        assert next_state(S.CANCELLING, i) in (None, S.CANCELLED)
        assert next_state(S.FAILING, i) in (None, S.FAILED)
