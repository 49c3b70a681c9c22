"""Sans-I/O protocol: state machine and error-catalog effects, without sockets."""

from __future__ import annotations

import base64
import json

import pytest

from ttsbridge.audio.g711 import alaw_encode, ulaw_encode
from ttsbridge.errors import TTSAPIError, TTSConnectionError
from ttsbridge.nineninesix.models import OutputFormat
from ttsbridge.nineninesix.protocol import (
    ERROR_CATALOG,
    AudioReceived,
    ConnectionFailed,
    ContextDone,
    ContextFailed,
    ContextState,
    NineninesixProtocol,
    effect_of,
)


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


def proto(**kw: object) -> NineninesixProtocol:
    p = NineninesixProtocol(OutputFormat(), **kw)  # type: ignore[arg-type]
    p.open_context("a")
    p.open_context("b")
    return p


def test_generation_request_carries_continue_format_and_voice() -> None:
    p = proto()
    msg = json.loads(
        p.generation("a", "Hello.", continue_=True, model="gepard-1.0", voice="v1", language="en")
    )
    assert msg == {
        "transcript": "Hello.",
        "context_id": "a",
        "continue": True,
        "model_id": "gepard-1.0",
        "voice": {"mode": "id", "id": "v1"},
        "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050},
        "language": "en",
    }
    end = json.loads(p.end("a"))
    assert end["continue"] is False and end["transcript"] == ""
    assert p.state("a") is ContextState.ENDING
    with pytest.raises(ValueError, match="no more text"):
        p.generation("a", "late", continue_=True)


def test_chunks_routed_by_context_and_done_only_for_its_context() -> None:
    p = proto()
    assert p.receive(chunk("a", b"\x01\x00\x02\x00")) == [AudioReceived("a", b"\x01\x00\x02\x00")]
    assert p.receive(chunk("b", b"\x03\x00")) == [AudioReceived("b", b"\x03\x00")]
    p.end("a")
    assert p.receive(done("a")) == [ContextDone("a")]
    assert p.state("a") is ContextState.DONE
    assert p.state("b") is ContextState.OPEN
    # a late chunk of a finished context is dropped, never routed elsewhere
    assert p.receive(chunk("a", b"\x05\x00")) == []
    assert p.receive(chunk(None, b"\x05\x00")) == []
    assert p.receive(chunk("zzz", b"\x05\x00")) == []
    assert p.dropped_frames == 3


def test_odd_bytes_are_carried_per_context() -> None:
    p = proto()
    assert p.receive(chunk("a", b"\x01\x00\x02")) == [AudioReceived("a", b"\x01\x00")]
    assert p.receive(chunk("b", b"\x09\x00")) == [AudioReceived("b", b"\x09\x00")]
    assert p.receive(chunk("a", b"\x00\x03\x00")) == [AudioReceived("a", b"\x02\x00\x03\x00")]


@pytest.mark.parametrize(("encoding", "encode"), [("pcm_mulaw", ulaw_encode), ("pcm_alaw", alaw_encode)])
def test_g711_is_decoded_to_pcm16(encoding: str, encode) -> None:  # type: ignore[no-untyped-def]
    p = NineninesixProtocol(OutputFormat(encoding=encoding, sample_rate=8000))  # type: ignore[arg-type]
    p.open_context("a")
    pcm = b"".join(int(v).to_bytes(2, "little", signed=True) for v in (0, 1000, -1000, 8000, -32000))
    (ev,) = p.receive(chunk("a", encode(pcm)))
    assert isinstance(ev, AudioReceived)
    assert len(ev.pcm) == 2 * 5  # one byte per sample on the wire, two after decoding
    decoded = [int.from_bytes(ev.pcm[i : i + 2], "little", signed=True) for i in range(0, 10, 2)]
    for got, want in zip(decoded, (0, 1000, -1000, 8000, -32000), strict=True):
        assert abs(got - want) <= max(8, abs(want) // 16)  # G.711 quantisation


def test_cancel_with_ack_waits_for_done_cancelled_and_drops_late_audio() -> None:
    p = proto(cancel_ack=True)
    frame = json.loads(p.cancel("a") or "")
    assert frame == {"context_id": "a", "cancel": True}
    assert p.state("a") is ContextState.CANCELLING
    assert p.receive(chunk("a", b"\x01\x00")) == []  # in-flight audio of a cancelled context is dropped
    assert p.receive(done("a", cancelled=True)) == [ContextDone("a", cancelled=True)]
    assert p.state("a") is ContextState.CANCELLED
    assert p.cancel("a") is None  # nothing more to cancel
    assert p.receive(chunk("b", b"\x01\x00")) == [AudioReceived("b", b"\x01\x00")]


def test_cancel_without_ack_is_immediate() -> None:
    p = proto(cancel_ack=False)
    assert p.cancel("a") is not None
    assert p.state("a") is ContextState.CANCELLED


def test_context_not_found_answers_a_racing_cancel() -> None:
    p = proto()
    p.cancel("a")
    assert p.receive(error("a", "context_not_found", 404)) == [ContextDone("a", cancelled=True)]
    # for a context we never cancelled, the server says it is gone: the turn ends rather than hang
    (ev,) = p.receive(error("b", "context_not_found", 404))
    assert isinstance(ev, ContextFailed) and ev.context_id == "b"
    assert p.state("b") is ContextState.FAILED and not p.closed
    # and for no context at all it changes nothing
    p.open_context("c")
    assert p.receive(error(None, "missing_context_id", 400)) == []
    assert p.state("c") is ContextState.OPEN


def test_generation_failed_ends_one_context_socket_stays() -> None:
    p = proto()
    (ev,) = p.receive(error("a", "generation_failed", 500))
    assert isinstance(ev, ContextFailed) and ev.context_id == "a"
    assert isinstance(ev.error, TTSAPIError)
    assert ev.error.error_code == "generation_failed" and ev.error.status_code == 500
    assert ev.error.retryable and not ev.error.closes_connection
    assert ev.error.request_id == "req-1"
    assert not p.closed
    assert p.state("b") is ContextState.OPEN


def test_concurrent_limit_drops_only_that_context_and_is_retryable() -> None:
    p = proto()
    (ev,) = p.receive(error("b", "concurrent_limit", 429))
    assert isinstance(ev, ContextFailed) and ev.error.retryable  # type: ignore[union-attr]
    assert p.state("a") is ContextState.OPEN and not p.closed


@pytest.mark.parametrize("code", [c for c, eff in ERROR_CATALOG.items() if eff.closes_socket])
def test_socket_closing_error_fails_every_context(code: str) -> None:
    p = proto()
    p.open_context("c")
    p.cancel("c")
    events = p.receive(error("a", code, ERROR_CATALOG[code].status_code))
    failed = {e.context_id: e.error for e in events if isinstance(e, ContextFailed)}
    assert set(failed) == {"a", "b"}
    assert all(isinstance(e, TTSAPIError) and e.error_code == code for e in failed.values())
    assert ContextDone("c", cancelled=True) in events  # a cancelling context ends as cancelled
    assert isinstance(events[-1], ConnectionFailed)
    assert p.closed


def test_error_without_context_that_closes_socket() -> None:
    p = proto()
    events = p.receive(error(None, "insufficient_credits", 402))
    assert {e.context_id for e in events if isinstance(e, ContextFailed)} == {"a", "b"}
    err = events[-1].error  # type: ignore[union-attr]
    assert isinstance(err, TTSAPIError) and not err.retryable and err.status_code == 402


def test_connection_lost_fails_live_contexts_once() -> None:
    p = proto()
    p.end("b")
    p.receive(done("b"))
    events = p.connection_lost("connection dropped")
    assert [e.context_id for e in events if isinstance(e, ContextFailed)] == ["a"]
    assert isinstance(events[-1], ConnectionFailed) and isinstance(events[-1].error, TTSConnectionError)
    assert p.connection_lost() == []
    with pytest.raises(TTSConnectionError):
        p.open_context("new")


def test_unknown_error_codes_are_judged_by_status() -> None:
    assert effect_of("something_new", 503).retryable
    assert not effect_of("something_new", 400).retryable
    assert effect_of("something_new", 401).fatal


def test_frames_of_types_this_api_does_not_send_are_ignored() -> None:
    # (frames that are not JSON objects at all fail the connection: test_nns_frames.py)
    p = proto()
    assert p.receive(json.dumps({"type": "timestamps", "context_id": "a"})) == []
    assert p.receive(json.dumps({"type": "flush_done", "context_id": "a", "flush_id": 1})) == []
    assert p.state("a") is ContextState.OPEN and not p.closed


def test_duplicate_context_id_rejected() -> None:
    p = proto()
    with pytest.raises(ValueError):
        p.open_context("a")
