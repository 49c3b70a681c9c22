"""The Kitta session's phase order as data (modelled on h11's ``_state.py``): one table, tested as a table."""

from __future__ import annotations

import enum
from typing import Final

__all__ = ["LIVE", "TERMINAL", "TRANSITIONS", "State"]


class State(str, enum.Enum):
    CONNECTING = "connecting"
    AUTHENTICATED = "authenticated"
    STARTED = "started"
    READY = "ready"
    STREAMING = "streaming"
    STOPPING = "stopping"
    FINISHED = "finished"
    FAILED = "failed"
    CLOSED = "closed"


TERMINAL: Final = frozenset({State.FINISHED, State.FAILED, State.CLOSED})
OPEN: Final = tuple(s for s in State if s not in TERMINAL)
LIVE: Final = (State.READY, State.STREAMING, State.STOPPING)

#: The phase order as data: ``(state, event) -> next state``. Events are the server's event names, the frames
#: going out (``send_auth``, ``send_start``, ``send_text`` for text and flush, ``send_stop``), ``fail`` (an
#: error event, a protocol error, a timeout, the socket lost) and ``close`` (ours). A server event missing
#: from the table is a protocol error; a command missing from it is held until it is allowed.
TRANSITIONS: Final[dict[tuple[State, str], State]] = {
    (State.CONNECTING, "send_auth"): State.CONNECTING,
    (State.CONNECTING, "authenticated"): State.AUTHENTICATED,
    (State.AUTHENTICATED, "send_start"): State.STARTED,
    (State.STARTED, "ready"): State.READY,
    (State.READY, "send_text"): State.STREAMING,
    (State.STREAMING, "send_text"): State.STREAMING,
    (State.READY, "send_stop"): State.STOPPING,
    (State.STREAMING, "send_stop"): State.STOPPING,
    **{(s, "audio"): s for s in LIVE},
    **{(s, "usage"): s for s in LIVE},
    **{(s, "finish"): State.FINISHED for s in LIVE},
    **{(s, "error"): State.FAILED for s in OPEN},
    **{(s, "fail"): State.FAILED for s in OPEN},
    **{(s, "close"): State.CLOSED for s in OPEN},
}
