"""The Kitta phase table, tested as a table (h11's ``test_state.py`` is the model), and the decisions the
protocol takes with the clock passed in: held starts, the "server owes us something" deadline, retries."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest

from ttsbridge.engine.dialers import StandbyDialer
from ttsbridge.engine.events import ConnectionFailed, TurnDone, TurnFailed
from ttsbridge.engine.protocol import RetryPlan
from ttsbridge.errors import TTSTimeoutError
from ttsbridge.kitta.catalog import SETTINGS, retry_backoff
from ttsbridge.kitta.facts import KittaRequest
from ttsbridge.kitta.models import StartRequest
from ttsbridge.kitta.protocol import KittaProtocol, KittaProtocolError, Outcome
from ttsbridge.kitta.states import TERMINAL, TRANSITIONS, State

S = State
RID = "turn-1"
SERVER_EVENTS = ("authenticated", "ready", "audio", "usage", "finish")

# The whole table, written out: anything not here is refused.
EXPECTED: dict[tuple[State, str], State] = {
    (S.CONNECTING, "send_auth"): S.CONNECTING,
    (S.CONNECTING, "authenticated"): S.AUTHENTICATED,
    (S.AUTHENTICATED, "send_start"): S.STARTED,
    (S.STARTED, "ready"): S.READY,
    (S.READY, "send_text"): S.STREAMING,
    (S.STREAMING, "send_text"): S.STREAMING,
    (S.READY, "send_stop"): S.STOPPING,
    (S.STREAMING, "send_stop"): S.STOPPING,
    **{(s, e): s for s in (S.READY, S.STREAMING, S.STOPPING) for e in ("audio", "usage")},
    **{(s, "finish"): S.FINISHED for s in (S.READY, S.STREAMING, S.STOPPING)},
    **{(s, e): S.FAILED for s in State if s not in TERMINAL for e in ("error", "fail")},
    **{(s, "close"): S.CLOSED for s in State if s not in TERMINAL},
}


def srv(**obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


FRAMES = {
    "authenticated": srv(event="authenticated"),
    "ready": srv(event="ready", request_id=RID, sample_rate=24000, channels=1, bit_depth=16),
    "audio": srv(
        event="audio", request_id=RID, audio=b"\x01\x00", sample_rate=24000, channels=1, bit_depth=16
    ),
    "usage": srv(event="usage", request_id=RID, units=1),
    "finish": srv(event="finish", request_id=RID, units=1),
}


def make(**kw: Any) -> KittaProtocol:
    return KittaProtocol(
        request=StartRequest(voice_id="tone", model="fishaudio-s21pro-flash", format="pcm"), **kw
    )


def drive_to(state: State) -> KittaProtocol:
    """A protocol in ``state``, reached through its inputs and commands only."""
    p = make()
    p.open_turn(RID, None, 0.0)
    steps: list[tuple[State, Any]] = [
        (S.AUTHENTICATED, lambda: p.receive(FRAMES["authenticated"], 0.0)),
        (S.STARTED, p.data_to_send),
        (S.READY, lambda: p.receive(FRAMES["ready"], 0.0)),
        (S.STREAMING, lambda: (p.send_text(RID, "Hi. ", 0.0), p.data_to_send())),
        (S.STOPPING, lambda: (p.end_turn(RID, 0.0), p.data_to_send())),
    ]
    for reached, step in steps:
        if p.state is state:
            break
        step()
        assert p.state is reached
    assert p.state is state
    p.events_received()
    return p


def test_the_table_is_exactly_the_phase_order() -> None:
    assert TRANSITIONS == EXPECTED
    assert not any(state in TERMINAL for state, _ in TRANSITIONS)  # nothing leaves a terminal state


@pytest.mark.parametrize(
    "state", [S.CONNECTING, S.AUTHENTICATED, S.STARTED, S.READY, S.STREAMING, S.STOPPING]
)
@pytest.mark.parametrize("event", SERVER_EVENTS)
def test_every_server_event_in_every_live_state_follows_the_table(state: State, event: str) -> None:
    p = drive_to(state)
    p.receive(FRAMES[event], 0.0)
    events = p.events_received()
    expected = TRANSITIONS.get((state, event))
    if expected is None:  # refused: the turn and the connection fail with a typed error, nothing raises
        assert p.state is S.FAILED and isinstance(p.error, KittaProtocolError)
        assert events[-2:] == [TurnFailed(RID, p.error), ConnectionFailed(p.error)]
    else:
        assert p.state is expected and p.error is None


def test_a_connection_without_a_turn_fails_alone() -> None:
    p = make()
    p.receive(FRAMES["ready"], 0.0)  # no turn was opened: 'ready' is out of order
    assert [type(e) for e in p.events_received()] == [ConnectionFailed]
    p = make()
    p.receive("a text frame", 0.0)
    assert isinstance(p.error, KittaProtocolError) and "text frame" in str(p.error)
    p = make()
    p.receive(FRAMES["authenticated"], 0.0)
    p.connection_lost(1006, "", 0.0)
    assert [type(e) for e in p.events_received()] == [ConnectionFailed] and p.facts is None


# --------------------------------------------------------------------------------------------- deadlines


def test_a_held_start_goes_out_at_its_time() -> None:
    p = make()
    p.open_turn(RID, KittaRequest(not_before=5.0), 0.0)
    p.receive(FRAMES["authenticated"], 1.0)
    assert p.data_to_send() == [] and p.next_deadline() == 5.0
    p.tick(4.9)
    assert p.data_to_send() == []
    p.tick(5.0)
    assert [msgpack.unpackb(f)["event"] for f in p.data_to_send()] == ["start"]
    assert p.next_deadline() == 5.0 + p.event_timeout  # the server owes 'ready' from the start


def test_the_server_owes_ready_then_audio_within_the_event_timeout() -> None:
    p = make(event_timeout=1.0)
    p.open_turn(RID, None, 0.0)
    assert p.next_deadline() == 1.0  # owes authenticated/ready
    p.receive(FRAMES["authenticated"], 0.5)
    p.data_to_send()
    p.receive(FRAMES["ready"], 0.6)
    assert p.next_deadline() is None  # ready, nothing flushed: nothing owed
    p.send_text(RID, "Hello. ", 0.7)
    assert p.next_deadline() is None  # buffered, not flushed
    p.flush(RID, 2.0)
    assert p.next_deadline() == 3.0
    p.tick(2.9)
    assert p.error is None
    p.tick(3.0)
    assert isinstance(p.error, TTSTimeoutError) and p.plan is None  # a timeout is never retried
    assert p.events_received() == [TurnFailed(RID, p.error), ConnectionFailed(p.error)]
    assert p.close_request == (1000, "failed")


# ---------------------------------------------------------------------------------------------- retries


def test_a_retryable_failure_yields_the_next_attempt_held_for_its_backoff() -> None:
    p = make(backoff_initial=0.4, backoff_max=0.4, rng=random.Random(7))
    p.open_turn(RID, None, 0.0)
    p.receive(FRAMES["authenticated"], 0.0)
    p.data_to_send()
    p.receive(FRAMES["ready"], 0.0)
    p.send_text(RID, "One. ", 0.0)
    p.flush(RID, 0.0)
    p.end_turn(RID, 0.0)
    p.data_to_send()
    p.receive(srv(event="error", code="overloaded", retryable=True), 10.0)
    plan = p.plan
    assert isinstance(plan, RetryPlan) and plan.turn_id == f"{RID}.r1"
    assert plan.dial_at == plan.not_before - 2.0  # its connection opens before its start is due
    nxt = make()
    nxt.open_turn(plan.turn_id, plan.request, 10.0)
    assert nxt.turn_id == f"{RID}.r1" and not nxt.accepts_turn
    failed = p.events_received()[0]
    assert (
        failed == TurnFailed(RID, p.error) and failed.retry is plan
    )  # that attempt failed; the turn goes on
    facts = nxt.facts
    assert facts is p.facts and facts is not None
    assert facts.retries == 1 and facts.ids == [RID, f"{RID}.r1"] and facts.outcome is None
    start_at = nxt.next_deadline()
    assert start_at is not None and 10.0 + 0.2 <= start_at <= 10.0 + 0.4  # equal jitter, from the failure
    assert [s.text for s in nxt.segments] == ["One. "] and nxt.stop_requested  # replayed


async def test_the_next_turn_after_a_retryable_failure_waits_its_backoff() -> None:
    """The standby dialer holds the next turn's start after a retryable failure that was not retried, by
    Kitta's retry backoff; a completed turn lifts the hold."""
    p = make(max_retries=0, backoff_initial=0.4, backoff_max=0.4)
    p.open_turn(RID, None, 0.0)
    p.connection_lost(1013, "", 10.0)
    assert p.facts is not None and p.facts.outcome is Outcome.FAILED
    (failed,) = [e for e in p.events_received() if isinstance(e, TurnFailed)]
    dialer = StandbyDialer(lambda _: p, SETTINGS, name="kitta", hold=retry_backoff(0.4, 0.4))

    class At:  # the link's clock at the failure
        def now(self) -> float:
            return 10.0

    dialer.hang_up(At(), failed)  # type: ignore[arg-type]
    hold = dialer.take_hold()
    assert hold is not None and 10.2 <= hold <= 10.4 and dialer.take_hold() is None  # one turn holds
    dialer.hang_up(At(), failed)  # type: ignore[arg-type]
    done = drive_to(S.STOPPING)
    done.receive(FRAMES["finish"], 1.0)
    assert done.events_received() == [TurnDone(RID)]
    dialer.hang_up(At(), TurnDone(RID))  # type: ignore[arg-type]
    assert dialer.take_hold() is None


def test_a_cancel_before_the_end_was_seen_wins() -> None:
    p = make(max_retries=0)
    p.open_turn(RID, None, 0.0)
    p.connection_lost(1006, "", 1.0)
    assert p.facts is not None and p.facts.error is not None
    p.cancel_turn(RID, 2.0)
    assert p.facts.outcome is Outcome.CANCELLED and p.facts.error is None
