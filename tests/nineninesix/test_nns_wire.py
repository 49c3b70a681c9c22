"""Type checks of every server-frame field the client uses (issue 9.3), on the sans-I/O protocol.

The rule (docs/nineninesix.md, "Malformed frames"): a malformed frame fails the turn it names; one whose
context cannot be read (not a JSON object, ``context_id`` of the wrong type, an error frame naming no context)
fails every turn on the connection, which is then closed. Frames naming a context we do not know are dropped.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from proto_driver import Driver

from ttsbridge.engine import AudioReceived, ConnectionFailed, TurnDone, TurnFailed
from ttsbridge.errors import TTSConnectionError
from ttsbridge.nineninesix.models import OutputFormat
from ttsbridge.nineninesix.protocol import ContextState, NineninesixProtocol
from ttsbridge.nineninesix.wire import NineninesixProtocolError

PCM = base64.b64encode(b"\x01\x00\x02\x00").decode()


def proto() -> Driver:
    p = Driver(NineninesixProtocol(OutputFormat()))
    for cid in ("a", "b"):
        p.open(cid)
        p.p.send_text(cid, "Hello.", p.now)
        p.p.end_turn(cid, p.now)
    p.p.data_to_send()  # written: the server knows both contexts
    return p


def frame(kind: str, **fields: Any) -> str:
    base: dict[str, Any] = {
        "chunk": {"type": "chunk", "context_id": "a", "done": False, "status_code": 206, "data": PCM},
        "done": {"type": "done", "context_id": "a", "done": True, "status_code": 200},
        "error": {
            "type": "error",
            "context_id": "a",
            "done": True,
            "error_code": "generation_failed",
            "status_code": 500,
        },
    }[kind]
    return json.dumps({**base, **fields})


def assert_turn_failed(p: Driver, events: list[Any], field: str) -> None:
    (ev,) = events
    assert isinstance(ev, TurnFailed) and ev.turn_id == "a"
    assert isinstance(ev.error, NineninesixProtocolError) and isinstance(ev.error, TTSConnectionError)
    assert field in str(ev.error)
    assert p.state("a") is ContextState.FAILED
    assert (
        p.state("b") is ContextState.ENDING and not p.p.closed
    )  # the other turn and the socket are unaffected


def assert_connection_failed(p: Driver, events: list[Any], text: str) -> None:
    assert isinstance(events[-1], ConnectionFailed) and text in str(events[-1].error)
    assert isinstance(events[-1].error, NineninesixProtocolError)
    assert sorted(e.turn_id for e in events if isinstance(e, TurnFailed)) == ["a", "b"]
    assert p.p.closed


def test_well_formed_frames_still_read() -> None:
    p = proto()
    assert p.rx(frame("chunk")) == [AudioReceived("a", b"\x01\x00\x02\x00")]
    assert p.rx(frame("done")) == [TurnDone("a")]
    (ev,) = p.rx(frame("error", context_id="b", status_code=None, title=None))
    assert isinstance(ev, TurnFailed) and ev.error.error_code == "generation_failed"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kind", "fields", "named"),
    [
        ("chunk", {"data": 1234}, "data must be a base64 string, got int"),
        ("chunk", {"data": None}, "data must be a base64 string, got NoneType"),
        ("chunk", {"data": ["AAA="]}, "data must be a base64 string, got list"),
        ("chunk", {"data": "not base64!"}, "data is not valid base64"),
        ("chunk", {"data": "AAE"}, "data is not valid base64"),  # bad padding
        ("chunk", {"data": "AAEC\n"}, "data is not valid base64"),  # a character outside the alphabet
        ("chunk", {"data": "AAE=AAE="}, "data is not valid base64"),  # data after the padding
        ("chunk", {"data": "AAEC===="}, "data is not valid base64"),  # excess padding
        ("done", {"cancelled": "yes"}, "cancelled must be a boolean, got str"),
        ("done", {"done": None}, "done must be a boolean"),
        ("done", {"status_code": "200"}, "status_code must be an integer, got str"),
        ("error", {"error_code": None, "status_code": None, "done": None}, "error_code must be a string"),
        ("error", {"status_code": "500"}, "status_code must be an integer or null, got str"),
        ("error", {"status_code": True}, "status_code must be an integer or null, got bool"),
        ("error", {"message": {"text": "x"}}, "message must be a string or null, got dict"),
        ("error", {"request_id": 7}, "request_id must be a string or null, got int"),
        ("error", {"doc_url": 7}, "doc_url must be a string or null, got int"),
    ],
)
def test_a_field_of_the_wrong_type_fails_the_turn_it_names(
    kind: str, fields: dict[str, Any], named: str
) -> None:
    p = proto()
    assert_turn_failed(p, p.rx(frame(kind, **fields)), named)


def test_a_malformed_chunk_also_cancels_its_context_on_the_server() -> None:
    p = proto()
    p.rx(frame("chunk", data=5))
    assert p.frames() == [{"context_id": "a", "cancel": True}]
    p.rx(frame("chunk", context_id="b"))
    assert p.rx(frame("chunk", context_id="a")) == []  # later audio of the failed turn: dropped


def test_a_malformed_end_of_a_context_being_cancelled_ends_it_cancelled() -> None:
    p = proto()
    assert p.cancel("a") == [{"context_id": "a", "cancel": True}]
    assert p.rx(frame("done", cancelled="true")) == [TurnDone("a", cancelled=True)]
    assert p.state("a") is ContextState.CANCELLED and p.frames() == []


@pytest.mark.parametrize("kind", ["chunk", "done", "error"])
@pytest.mark.parametrize("cid", [5, ["a"], {"id": "a"}, True])
def test_a_context_id_of_the_wrong_type_fails_the_connection(kind: str, cid: Any) -> None:
    p = proto()
    assert_connection_failed(p, p.rx(frame(kind, context_id=cid)), "context_id must be a string or null")


NOT_RFC_8259 = [  # Python's json takes these; RFC 8259 has no NaN or Infinity, and a lone surrogate is no text
    '{"type": "chunk", "context_id": "a", "data": "AAE=", "step_time": NaN}',
    '{"type": "chunk", "context_id": "a", "data": "AAE=", "step_time": Infinity}',
    '{"type": "chunk", "context_id": "a\\ud800", "data": "AAE="}',  # a lone surrogate
]


@pytest.mark.parametrize(
    "text", ["not json", "[1,2]", '"chunk"', "", b"\xff\xfe", b'{"type": ', *NOT_RFC_8259]
)
def test_a_frame_that_is_not_a_json_object_fails_the_connection(text: str | bytes) -> None:
    p = proto()
    assert_connection_failed(p, p.rx(text), "not a JSON object")


def test_an_unreadable_error_frame_naming_no_context_fails_the_connection() -> None:
    p = proto()
    assert_connection_failed(p, p.rx(frame("error", context_id=None, error_code=3)), "error_code")


def test_malformed_frames_of_unknown_or_finished_contexts_are_dropped() -> None:
    p = proto()
    p.rx(frame("done", context_id="b"))
    for text in (
        frame("chunk", context_id="zzz", data=5),
        frame("chunk", context_id=None, data=5),  # no context: not one of ours (we always send an id)
        frame("chunk", context_id="b", data="!!"),
        frame("done", context_id="zzz", cancelled=1),
        frame("error", context_id="b", error_code=None),
    ):
        assert p.rx(text) == []
    assert p.state("a") is ContextState.ENDING and not p.p.closed and p.frames() == []
