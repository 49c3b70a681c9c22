"""Sans-I/O protocol: state machine and error-catalog effects, without sockets."""

from __future__ import annotations

import base64
import json

import pytest
from proto_driver import Driver

from ttsbridge.audio.g711 import alaw_encode, ulaw_encode
from ttsbridge.engine import AudioReceived, ConnectionFailed, TurnDone, TurnFailed
from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSTimeoutError
from ttsbridge.nineninesix.models import OutputFormat
from ttsbridge.nineninesix.protocol import ERROR_CATALOG, ContextState, NineninesixProtocol, effect_of


def chunk(cid: str | None, data: bytes) -> str:
    return json.dumps(
        {
            "type": "chunk",
            "context_id": cid,
            "done": False,
            "status_code": 206,
            "data": base64.b64encode(data).decode(),
        }
    )


def done(cid: str, cancelled: bool = False) -> str:
    msg = {"type": "done", "context_id": cid, "done": True, "status_code": 200}
    if cancelled:
        msg["cancelled"] = True
    return json.dumps(msg)


def error(cid: str | None, code: str, status: int) -> str:
    return json.dumps(
        {
            "type": "error",
            "context_id": cid,
            "done": True,
            "error_code": code,
            "status_code": status,
            "title": code,
            "message": f"{code} happened",
            "doc_url": "",
            "request_id": "req-1",
        }
    )


def proto(**kw: object) -> Driver:
    d = Driver(NineninesixProtocol(OutputFormat(), **kw))  # type: ignore[arg-type]
    d.open("a")
    d.open("b")
    return d


def test_generation_request_carries_continue_format_and_voice() -> None:
    p = Driver(NineninesixProtocol(OutputFormat()))
    p.open("a", model="gepard-1.0", voice="v1", language="en")
    (msg,) = p.send("a", "Hello.")
    assert msg == {
        "transcript": "Hello.",
        "context_id": "a",
        "continue": True,
        "model_id": "gepard-1.0",
        "voice": {"mode": "id", "id": "v1"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050},
        "language": "en",
    }
    (end,) = p.end("a")
    assert end["continue"] is False and end["transcript"] == ""
    assert p.state("a") is ContextState.ENDING
    with pytest.raises(ValueError, match="no more text"):
        p.send("a", "late")


def test_chunks_routed_by_context_and_done_only_for_its_context() -> None:
    p = proto()
    assert p.rx(chunk("a", b"\x01\x00\x02\x00")) == [AudioReceived("a", b"\x01\x00\x02\x00")]
    assert p.rx(chunk("b", b"\x03\x00")) == [AudioReceived("b", b"\x03\x00")]
    p.end("a")
    assert p.rx(done("a")) == [TurnDone("a")]
    assert p.state("a") is ContextState.DONE
    assert p.state("b") is ContextState.OPEN
    # a late chunk of a finished context is dropped, never routed elsewhere
    assert p.rx(chunk("a", b"\x05\x00")) == []
    assert p.rx(chunk(None, b"\x05\x00")) == []
    assert p.rx(chunk("zzz", b"\x05\x00")) == []
    assert p.p.dropped_frames == 3


def test_odd_bytes_are_carried_per_context() -> None:
    p = proto()
    assert p.rx(chunk("a", b"\x01\x00\x02")) == [AudioReceived("a", b"\x01\x00")]
    assert p.rx(chunk("b", b"\x09\x00")) == [AudioReceived("b", b"\x09\x00")]
    assert p.rx(chunk("a", b"\x00\x03\x00")) == [AudioReceived("a", b"\x02\x00\x03\x00")]


@pytest.mark.parametrize(("encoding", "encode"), [("pcm_mulaw", ulaw_encode), ("pcm_alaw", alaw_encode)])
def test_g711_is_decoded_to_pcm16(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    p = Driver(NineninesixProtocol(OutputFormat(encoding=encoding, sample_rate=8000)))  # type: ignore[arg-type]
    p.open("a")
    pcm = b"".join(int(v).to_bytes(2, "little", signed=True) for v in (0, 1000, -1000, 8000, -32000))
    (ev,) = p.rx(chunk("a", encode(pcm)))
    assert isinstance(ev, AudioReceived)
    assert len(ev.pcm) == 2 * 5  # one byte per sample on the wire, two after decoding
    decoded = [int.from_bytes(ev.pcm[i : i + 2], "little", signed=True) for i in range(0, 10, 2)]
    for got, want in zip(decoded, (0, 1000, -1000, 8000, -32000), strict=True):
        assert abs(got - want) <= max(8, abs(want) // 16)  # G.711 quantisation


def test_cancel_with_ack_waits_for_done_cancelled_and_drops_late_audio() -> None:
    p = proto(cancel_ack=True)
    p.send("a", "Hello.")  # the server has heard of it: a cancel goes on the wire
    assert p.cancel("a") == [{"context_id": "a", "cancel": True}]
    assert p.state("a") is ContextState.CANCELLING
    assert p.rx(chunk("a", b"\x01\x00")) == []  # in-flight audio of a cancelled context is dropped
    assert p.rx(done("a", cancelled=True)) == [TurnDone("a", cancelled=True)]
    assert p.state("a") is ContextState.CANCELLED
    assert p.cancel("a") == []  # nothing more to cancel
    assert p.rx(chunk("b", b"\x01\x00")) == [AudioReceived("b", b"\x01\x00")]


def test_cancel_without_ack_is_immediate() -> None:
    p = proto(cancel_ack=False)
    p.send("a", "Hello.")
    assert p.cancel("a") == [{"context_id": "a", "cancel": True}]
    assert p.state("a") is ContextState.CANCELLED


def test_context_not_found_answers_a_racing_cancel() -> None:
    p = proto()
    p.send("a", "Hello.")
    p.cancel("a")
    assert p.rx(error("a", "context_not_found", 404)) == [TurnDone("a", cancelled=True)]
    # for a context we never cancelled, the server says it is gone: the turn ends rather than hang
    (ev,) = p.rx(error("b", "context_not_found", 404))
    assert isinstance(ev, TurnFailed) and ev.turn_id == "b"
    assert p.state("b") is ContextState.FAILED and not p.p.closed
    # and for no context at all it changes nothing
    p.open("c")
    assert p.rx(error(None, "missing_context_id", 400)) == []
    assert p.state("c") is ContextState.OPEN


def test_generation_failed_ends_one_context_socket_stays() -> None:
    p = proto()
    (ev,) = p.rx(error("a", "generation_failed", 500))
    assert isinstance(ev, TurnFailed) and ev.turn_id == "a"
    assert isinstance(ev.error, TTSAPIError)
    assert ev.error.error_code == "generation_failed" and ev.error.status_code == 500
    assert ev.error.retryable and not ev.error.closes_connection
    assert ev.error.request_id == "req-1"
    assert not p.p.closed
    assert p.state("b") is ContextState.OPEN


def test_concurrent_limit_drops_only_that_context_and_is_retryable() -> None:
    p = proto()
    (ev,) = p.rx(error("b", "concurrent_limit", 429))
    assert isinstance(ev, TurnFailed) and ev.error.retryable  # type: ignore[union-attr]
    assert p.state("a") is ContextState.OPEN and not p.p.closed


@pytest.mark.parametrize("code", [c for c, eff in ERROR_CATALOG.items() if eff.closes_socket])
def test_socket_closing_error_fails_every_context(code: str) -> None:
    p = proto()
    p.open("c")
    p.send("c", "Hello.")
    p.cancel("c")
    events = p.rx(error("a", code, ERROR_CATALOG[code].status_code))
    failed = {e.turn_id: e.error for e in events if isinstance(e, TurnFailed)}
    assert set(failed) == {"a", "b"}
    assert all(isinstance(e, TTSAPIError) and e.error_code == code for e in failed.values())
    assert TurnDone("c", cancelled=True) in events  # a cancelling context ends as cancelled
    assert isinstance(events[-1], ConnectionFailed)
    assert p.p.closed


def test_error_without_context_that_closes_socket() -> None:
    p = proto()
    events = p.rx(error(None, "insufficient_credits", 402))
    assert {e.turn_id for e in events if isinstance(e, TurnFailed)} == {"a", "b"}
    err = events[-1].error  # type: ignore[union-attr]
    assert isinstance(err, TTSAPIError) and not err.retryable and err.status_code == 402


def test_connection_lost_fails_live_contexts_once() -> None:
    p = proto()
    p.end("b")
    p.rx(done("b"))
    events = p.lost("connection dropped")
    assert [e.turn_id for e in events if isinstance(e, TurnFailed)] == ["a"]
    assert isinstance(events[-1], ConnectionFailed) and isinstance(events[-1].error, TTSConnectionError)
    assert p.lost() == []
    with pytest.raises(TTSConnectionError):
        p.open("new")


def test_unknown_error_codes_are_judged_by_status() -> None:
    assert effect_of("something_new", 503).retryable
    assert not effect_of("something_new", 400).retryable
    assert effect_of("something_new", 401).fatal


def test_frames_of_types_this_api_does_not_send_are_ignored() -> None:
    # (frames that are not JSON objects at all fail the connection: test_nns_frames.py)
    p = proto()
    assert p.rx(json.dumps({"type": "timestamps", "context_id": "a"})) == []
    assert p.rx(json.dumps({"type": "flush_done", "context_id": "a", "flush_id": 1})) == []
    assert p.state("a") is ContextState.OPEN and not p.p.closed


def test_duplicate_context_id_rejected() -> None:
    p = proto()
    with pytest.raises(ValueError):
        p.open("a")


# --- deadlines (the clock is passed in) ---------------------------------------------------------------------


def test_owed_audio_deadline_fails_the_context_once_its_cancel_is_answered() -> None:
    p = Driver(NineninesixProtocol(OutputFormat(), receive_timeout=1.0, ack_wait=0.5))
    p.open("a")
    assert p.p.next_deadline() is None  # nothing sent: nothing owed
    p.send("a", "Hello.")
    assert p.p.next_deadline() == 1.0
    p.now = 0.2
    p.rx(chunk("a", b"\x01\x00"))  # heard after the text: nothing owed any more
    assert p.p.next_deadline() is None
    p.now = 0.5
    p.send("a", " More.")
    assert p.p.next_deadline() == 1.5
    p.p.tick(1.4)
    assert p.p.events_received() == [] and p.state("a") is ContextState.OPEN
    p.p.tick(1.5)
    assert p.frames() == [{"context_id": "a", "cancel": True}]  # stopped on the server first
    assert p.state("a") is ContextState.FAILING and p.p.events_received() == []
    assert p.rx(chunk("a", b"\x01\x00")) == []  # its late audio is not delivered
    (ev,) = p.rx(done("a", cancelled=True))
    assert isinstance(ev, TurnFailed) and isinstance(ev.error, TTSTimeoutError)
    assert "no audio for context a within 1.0s" in str(ev.error)
    assert p.state("a") is ContextState.FAILED and "a" not in p.p.contexts


def test_a_cancel_answer_that_never_comes_ends_the_context_at_its_deadline() -> None:
    p = Driver(NineninesixProtocol(OutputFormat(), receive_timeout=1.0, ack_wait=0.5, cancel_timeout=2.0))
    p.open("a")
    p.open("b")
    p.end("a")
    p.send("b", "Hello.")
    p.cancel("b")
    p.p.tick(1.0)  # a is overdue: cancelled, failing until t=1.5
    assert p.p.next_deadline() == 1.5
    p.p.tick(1.5)
    (ev,) = p.p.events_received()
    assert isinstance(ev, TurnFailed) and ev.turn_id == "a" and isinstance(ev.error, TTSTimeoutError)
    assert p.p.next_deadline() == 2.0  # b's cancel answer is owed until then
    p.p.tick(2.0)
    assert p.p.events_received() == [TurnDone("b", cancelled=True)] and p.p.contexts == {}


def test_a_cancel_before_anything_was_written_drops_the_context_and_its_frames() -> None:
    p = proto()
    p.p.send_text("a", "Hello.", 0.0)  # queued, not yet handed to the socket
    assert p.cancel("a") == []  # nothing is sent: the server never heard of it
    assert p.p.events_received() == [TurnDone("a", cancelled=True)]
    assert p.state("a") is ContextState.CANCELLED and p.facts["a"].frames_sent == 0
