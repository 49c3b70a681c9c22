"""Context states of the Nineninesix WebSocket protocol, and their transitions as data (h11's ``_state.py``).

:data:`TRANSITIONS` is the whole state machine: ``(state, input) -> new state``. A pair that is not in it is
not a transition: the protocol drops the frame (or refuses the command) instead. ``tests/nineninesix/
test_nns_states.py`` tests the table itself.

    OPEN --END--> ENDING --DONE--> DONE             (a DONE while OPEN ends nothing: not in the table)
    OPEN/ENDING --CANCEL--> CANCELLING --DONE/DONE_CANCELLED/NOT_FOUND/ERROR/MALFORMED/LOST/ACK_TIMEOUT--> CANCELLED
    OPEN/ENDING --CANCEL_NOW--> CANCELLED           (no cancel_ack, or no request of it ever sent)
    OPEN/ENDING --TIMEOUT--> FAILING --(the cancel's answer, or ACK_TIMEOUT)--> FAILED
    OPEN/ENDING --ERROR/MALFORMED/LOST/TIMEOUT_NOW--> FAILED
    OPEN/ENDING --DONE_CANCELLED--> CANCELLED        (the server cancelled it: the caller hears "cancelled")
"""

from __future__ import annotations

import enum


class ContextState(enum.Enum):
    OPEN = "open"
    ENDING = "ending"
    DONE = "done"
    CANCELLING = "cancelling"
    CANCELLED = "cancelled"
    #: Timed out: its cancel is on the wire, its failure is reported once the server answers (bounded).
    FAILING = "failing"
    FAILED = "failed"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def accepts_audio(self) -> bool:
        return self in _LIVE


_TERMINAL = frozenset({ContextState.DONE, ContextState.CANCELLED, ContextState.FAILED})
_LIVE = frozenset({ContextState.OPEN, ContextState.ENDING})


class Input(enum.Enum):
    """What can happen to a context: our commands, the server's frames, the clock."""

    END = "end"  # we sent continue: false
    CANCEL = "cancel"  # we sent a cancel and wait for its answer (cancel_ack)
    CANCEL_NOW = "cancel_now"  # cancelled at once: no cancel_ack, or the server never heard of it
    DONE = "done"  # done frame
    DONE_CANCELLED = "done_cancelled"  # done frame with cancelled: true
    NOT_FOUND = "not_found"  # context_not_found for it
    ERROR = "error"  # an error frame for it (or a socket-closing one)
    MALFORMED = "malformed"  # a frame for it we cannot read
    LOST = "lost"  # the connection closed or dropped
    TIMEOUT = "timeout"  # audio owed and none came: cancel it, fail once answered
    TIMEOUT_NOW = "timeout_now"  # the same without an answer to wait for
    ACK_TIMEOUT = "ack_timeout"  # the answer to our cancel never came (within the bound)


_S, _I = ContextState, Input
_ENDS_A_CANCEL = (_I.DONE, _I.DONE_CANCELLED, _I.NOT_FOUND, _I.ERROR, _I.MALFORMED, _I.LOST)

TRANSITIONS: dict[tuple[ContextState, Input], ContextState] = {
    (_S.OPEN, _I.END): _S.ENDING,
    (_S.ENDING, _I.DONE): _S.DONE,
    **{(live, _I.CANCEL): _S.CANCELLING for live in _LIVE},
    **{(live, _I.CANCEL_NOW): _S.CANCELLED for live in _LIVE},
    **{(live, _I.DONE_CANCELLED): _S.CANCELLED for live in _LIVE},
    **{(live, _I.TIMEOUT): _S.FAILING for live in _LIVE},
    **{
        (live, i): _S.FAILED
        for live in _LIVE
        for i in (_I.ERROR, _I.MALFORMED, _I.LOST, _I.NOT_FOUND, _I.TIMEOUT_NOW)
    },
    **{(_S.CANCELLING, i): _S.CANCELLED for i in (*_ENDS_A_CANCEL, _I.ACK_TIMEOUT)},
    **{(_S.FAILING, i): _S.FAILED for i in (*_ENDS_A_CANCEL, _I.ACK_TIMEOUT)},
}
del _S, _I


def next_state(state: ContextState, event: Input) -> ContextState | None:
    """The state after ``event``, or None when ``event`` changes nothing in ``state``."""
    return TRANSITIONS.get((state, event))


__all__ = ["TRANSITIONS", "ContextState", "Input", "next_state"]
