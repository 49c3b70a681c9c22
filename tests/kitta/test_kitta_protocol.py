"""Pure unit tests of the Kitta wire models and the sans-I/O session (no sockets).

The session's contract is the engine's: ``receive(frame, now)`` returns nothing (events come from
``events_received()``), a server's fault never raises, ``connection_lost`` emits events."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnDone, TurnFailed
from ttsbridge.engine.protocol import RetryPlan
from ttsbridge.errors import TTSAPIError, TTSInvalidOptionError
from ttsbridge.kitta.catalog import build_url, retry_request_id
from ttsbridge.kitta.facts import KittaRequest
from ttsbridge.kitta.models import (
    AudioEvent,
    AuthEvent,
    ErrorEvent,
    KittaLimits,
    KittaOptions,
    ReadyEvent,
    StartEvent,
    StartRequest,
    TextEvent,
)
from ttsbridge.kitta.protocol import (
    KittaConnectionClosed,
    KittaLimitError,
    KittaProtocol,
    KittaProtocolError,
    SegmentStatus,
    State,
    decode,
    encode,
    split_text,
)

RID = "req-1"


def srv(**obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def unpack(frames: list[bytes]) -> list[dict[str, Any]]:
    return [msgpack.unpackb(f, raw=False) for f in frames]


def make(auth: str = "header", limits: KittaLimits | None = None, *, turn: bool = True) -> KittaProtocol:
    req = StartRequest(voice_id="tone", model="fishaudio-s21pro-flash", format="pcm")
    p = KittaProtocol(
        request=req,
        auth=auth,
        token="kitta_secret" if auth == "frame" else None,
        limits=limits or KittaLimits(),
    )
    if turn:
        p.open_turn(RID, None, 0.0)
    return p


def feed(p: KittaProtocol, frame: bytes) -> list[Event]:
    """Receive one frame; the events it released."""
    assert p.receive(frame, 0.0) is None  # type: ignore[func-returns-value]
    return p.events_received()


def audio_of(events: list[Event]) -> list[bytes]:
    return [e.pcm for e in events if isinstance(e, AudioReceived)]


def protocol_error(p: KittaProtocol, frame: bytes) -> KittaProtocolError:
    """Receive a frame that breaks the protocol: it fails the turn and the connection, and never raises."""
    events = feed(p, frame)
    assert p.state is State.FAILED and isinstance(p.error, KittaProtocolError)
    assert isinstance(events[-1], ConnectionFailed) and events[-1].error is p.error
    if p.turn_id is not None:
        assert TurnFailed(RID, p.error) in events
    return p.error


def ready(p: KittaProtocol) -> list[dict[str, Any]]:
    """Drive a session to READY; returns the frames it sent on the way."""
    sent = unpack(p.data_to_send())
    feed(p, srv(event="authenticated"))
    sent += unpack(p.data_to_send())
    feed(p, srv(event="ready", request_id=RID, sample_rate=24000, channels=1, bit_depth=16))
    return sent


def audio(seq: int | None, data: bytes = b"\x01\x00" * 4) -> bytes:
    obj: dict[str, Any] = {
        "event": "audio",
        "request_id": RID,
        "audio": data,
        "sample_rate": 24000,
        "channels": 1,
        "bit_depth": 16,
    }
    if seq is not None:
        obj["seq"] = seq
    return srv(**obj)


# ------------------------------------------------------------------------------------------------- models


def test_client_events_are_strict() -> None:
    with pytest.raises(ValidationError):
        TextEvent.model_validate({"event": "text", "text": "hi", "extra": 1})
    with pytest.raises(ValidationError):
        StartRequest.model_validate({"voice_id": "v", "model": "m", "format": "pcm", "Speed": 1.0})
    with pytest.raises(ValidationError):
        StartEvent(request_id="", request=StartRequest(voice_id="v", model="m", format="pcm"))
    with pytest.raises(ValidationError):
        StartEvent(request_id="x" * 129, request=StartRequest(voice_id="v", model="m", format="pcm"))
    StartEvent(request_id="x" * 128, request=StartRequest(voice_id="v", model="m", format="pcm"))


def test_auth_token_is_not_in_repr() -> None:
    assert "kitta_secret" not in repr(AuthEvent(token="kitta_secret"))


def test_msgpack_round_trip_of_client_events() -> None:
    start = StartEvent(
        request_id="abc",
        request=StartRequest(
            voice_id="v", model="fishaudio-s21pro-flash", format="pcm", speed=1, latency="normal"
        ),
    )
    obj = msgpack.unpackb(encode(start), raw=False)
    assert obj == {
        "event": "start",
        "request_id": "abc",
        "request": {
            "voice_id": "v",
            "model": "fishaudio-s21pro-flash",
            "format": "pcm",
            "speed": 1.0,
            "latency": "normal",
        },
    }  # None fields left out
    assert StartEvent.model_validate(obj) == start


def test_server_events_tolerate_extra_fields_and_audio_is_raw_bytes() -> None:
    ev = decode(
        srv(
            event="audio",
            request_id=RID,
            sequence=3,
            audio=b"\x00\x01",
            sample_rate=24000,
            channels=1,
            bit_depth=16,
            new_field="x",
        )
    )
    assert isinstance(ev, AudioEvent)
    assert ev.seq == 3 and ev.audio == b"\x00\x01"
    err = decode(srv(event="error", code="internal_error", message="m", retryable=True, trace="t"))
    assert isinstance(err, ErrorEvent) and err.retryable
    assert decode(srv(event="something_new", x=1)) is None  # unknown events are ignored
    with pytest.raises(KittaProtocolError):
        decode(b"\xc1")  # not msgpack
    with pytest.raises(KittaProtocolError):
        decode(srv(event="finish", units="many"))


# ------------------------------------------------------------------------------------------------ options


def test_options_validated_before_connecting() -> None:
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", format="mp3")
    assert exc.value.field == "format" and exc.value.allowed == ["pcm"]
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", model="nope")
    assert exc.value.field == "model" and "qwen-tts" in exc.value.allowed
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", model="qwen-tts", speed=1.2)  # Qwen has no speed
    assert exc.value.field == "speed" and "qwen-tts" in str(exc.value)
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", model="minimax-speech", chunk_length=200)
    assert exc.value.field == "chunk_length"
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", speed=5)
    assert exc.value.field == "speed" and exc.value.value == 5
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaOptions(voice_id="v", voice="x")
    assert exc.value.field == "voice"
    with pytest.raises(TTSInvalidOptionError):
        KittaOptions(voice_id="v", sample_rate=1000)
    ok = KittaOptions(
        voice_id="v", model="qwen-tts", instructions="calm", optimize_instructions=True, language="en"
    )
    assert ok.start_request().model_dump(exclude_none=True) == {
        "voice_id": "v",
        "model": "qwen-tts",
        "format": "pcm",
        "language": "en",
        "instructions": "calm",
        "optimize_instructions": True,
    }
    assert ok.with_overrides(language="de").language == "de"


def test_urls_never_carry_keys() -> None:
    assert build_url("https://realtime.fishaudio.org") == "wss://realtime.fishaudio.org/v2/tts/live"
    assert build_url("http://127.0.0.1:9/") == "ws://127.0.0.1:9/v2/tts/live"
    assert build_url("wss://h/v2/tts/live") == "wss://h/v2/tts/live"
    for bad in ("wss://h/?token=kitta_x", "wss://h/?api_key=kitta_x", "ftp://h", "wss://u:kitta_x@h/"):
        with pytest.raises(TTSInvalidOptionError) as exc:
            build_url(bad)
        assert "kitta_x" not in str(exc.value)


def test_retry_request_ids_are_derived_and_bounded() -> None:
    assert retry_request_id("abc", 1) == "abc.r1"
    long = retry_request_id("x" * 128, 12)
    assert len(long) == 128 and long.endswith(".r12")


# ---------------------------------------------------------------------------------------------- splitting


def test_split_prefers_sentences_then_words() -> None:
    s1 = "A" * 1500 + ". "
    s2 = "B" * 900 + ". "
    pieces = split_text(s1 + s2, 2000)
    assert pieces == [s1, s2]
    words = " ".join(["word"] * 600)  # 2999 chars, no sentence end
    pieces = split_text(words, 2000)
    assert "".join(pieces) == words and all(len(p) <= 2000 for p in pieces)
    assert pieces[0].endswith(" ") and not pieces[1].startswith(" ")
    blob = "x" * 4500
    assert split_text(blob, 2000) == ["x" * 2000, "x" * 2000, "x" * 500]
    assert split_text("", 10) == []
    assert split_text("short.", 10) == ["short."]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([". ", "! ", "? ", " ", "\n", "。", "  "]), st.text(min_size=1, max_size=40)
        ),
        max_size=60,
    ),
    st.integers(min_value=5, max_value=120),
)
def test_split_round_trips_and_respects_limit(parts: list[str], limit: int) -> None:
    text = "".join(parts)
    pieces = split_text(text, limit)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= limit for p in pieces)


# -------------------------------------------------------------------------------------------- the machine


def test_phase_order_and_gating() -> None:
    p = make()
    assert p.state is State.CONNECTING
    p.send_text(RID, "Hello. ", 0.0)
    p.flush(RID, 0.0)
    assert p.data_to_send() == []  # nothing before authenticated (header auth)
    feed(p, srv(event="authenticated"))
    assert p.state is State.AUTHENTICATED
    sent = unpack(p.data_to_send())
    assert [f["event"] for f in sent] == ["start"] and sent[0]["request_id"] == RID
    assert p.state is State.STARTED
    assert p.data_to_send() == []  # text waits for ready
    feed(p, srv(event="ready", request_id=RID, sample_rate=24000, channels=1, bit_depth=16))
    assert p.state is State.READY and p.sample_rate == 24000
    assert unpack(p.data_to_send()) == [{"event": "text", "text": "Hello. "}, {"event": "flush"}]
    assert p.state is State.STREAMING
    p.end_turn(RID, 0.0)
    assert unpack(p.data_to_send()) == [{"event": "stop"}]
    assert p.state is State.STOPPING
    with pytest.raises(KittaProtocolError):
        p.send_text(RID, "after stop", 0.0)  # the caller's mistake: raised, the session is untouched
    assert p.error is None and p.state is State.STOPPING
    assert feed(p, srv(event="finish", request_id=RID, units=6)) == [TurnDone(RID)]
    assert p.state is State.FINISHED and p.finish_units == 6 and p.close_request == (1000, "finished")
    p.connection_lost(1000, "", 0.0)
    assert p.events_received() == [] and p.error is None


def test_frame_auth_sends_the_auth_event_first() -> None:
    p = make(auth="frame")
    assert unpack(p.data_to_send()) == [{"event": "auth", "token": "kitta_secret"}]
    assert "kitta_secret" not in repr(p)


def test_out_of_order_server_events_fail_the_session() -> None:
    p = make()
    protocol_error(p, srv(event="ready", request_id=RID, sample_rate=24000, channels=1, bit_depth=16))
    p = make()
    ready(p)
    protocol_error(p, srv(event="authenticated"))
    p = make()
    feed(p, srv(event="authenticated"))
    p.data_to_send()
    protocol_error(
        p, srv(event="ready", request_id="someone-else", sample_rate=24000, channels=1, bit_depth=16)
    )


@pytest.mark.parametrize("missing", ["sample_rate", "channels", "bit_depth"])
@pytest.mark.parametrize("event", ["ready", "audio"])
def test_pcm_ready_and_audio_without_a_required_layout_field_fail_the_session(
    event: str, missing: str
) -> None:
    # The page: "When format is pcm, both ready and audio include the required sample_rate, channels, and
    # bit_depth fields". A frame without one is malformed, even when an earlier frame carried it.
    layout = {"sample_rate": 24000, "channels": 1, "bit_depth": 16}
    p = make()
    if event == "ready":
        feed(p, srv(event="authenticated"))
        p.data_to_send()
        frame = srv(event="ready", request_id=RID, **{k: v for k, v in layout.items() if k != missing})
    else:
        ready(p)
        p.send_text(RID, "One. ", 0.0)
        p.flush(RID, 0.0)
        p.data_to_send()
        fields = {k: v for k, v in layout.items() if k != missing}
        frame = srv(event="audio", request_id=RID, seq=0, audio=b"\x01\x00", **fields)
    err = protocol_error(p, frame)
    assert missing in str(err) and event in str(err)


@pytest.mark.parametrize("missing", ["sample_rate", "channels", "bit_depth"])
@pytest.mark.parametrize("model", [ReadyEvent, AudioEvent])
def test_the_pcm_layout_fields_are_required_by_the_models(model: type, missing: str) -> None:
    # the models say what the protocol enforces (the page: required with pcm, the only format asked for)
    fields = {"request_id": RID, "sample_rate": 24000, "channels": 1, "bit_depth": 16, "audio": b"\x01\x00"}
    if model is ReadyEvent:
        del fields["audio"]
    assert model.model_fields[missing].is_required()
    with pytest.raises(ValidationError) as info:
        model.model_validate({k: v for k, v in fields.items() if k != missing})
    assert missing in str(info.value)


def test_audio_at_another_sample_rate_than_ready_fails_the_session() -> None:
    # 'ready' sets the session's format; an audio frame claiming another rate is malformed, not a new format
    # (fuzz: a chunk "at 123 Hz" was resampled as such and played as noise)
    p = make()
    ready(p)  # 24000
    p.send_text(RID, "One. ", 0.0)
    p.flush(RID, 0.0)
    p.data_to_send()
    assert audio_of(feed(p, audio(0)))  # at the session's rate: fine
    frame = srv(
        event="audio", request_id=RID, seq=1, audio=b"\x01\x00", sample_rate=123, channels=1, bit_depth=16
    )
    err = protocol_error(p, frame)
    assert "sample_rate 123" in str(err) and "24000" in str(err)


def test_stereo_or_8bit_pcm_is_refused() -> None:
    p = make()
    feed(p, srv(event="authenticated"))
    p.data_to_send()
    protocol_error(p, srv(event="ready", request_id=RID, sample_rate=24000, channels=2, bit_depth=16))


def test_long_text_is_split_into_text_events() -> None:
    p = make()
    ready(p)
    text = ("Sentence number one is here. " * 100).strip()  # 2899 chars
    p.send_text(RID, text, 0.0)
    p.flush(RID, 0.0)
    frames = unpack(p.data_to_send())
    texts = [f["text"] for f in frames if f["event"] == "text"]
    assert len(texts) == 2 and "".join(texts) == text
    assert all(len(t) <= 2000 for t in texts)
    assert texts[0].endswith(". ")  # at a sentence boundary
    assert [f["event"] for f in frames].count("flush") == 1
    assert len(p.segments) == 1 and p.segments[0].text == text


def test_segment_is_flushed_early_before_the_segment_limit() -> None:
    p = make()
    ready(p)
    sentence = "x" * 1499 + ". "  # 1501 chars
    for _ in range(8):  # 12,008 chars without a flush
        p.send_text(RID, sentence, 0.0)
    frames = unpack(p.data_to_send())
    segment, sizes = 0, []
    for f in frames:
        if f["event"] == "text":
            segment += len(f["text"])
        elif f["event"] == "flush":
            sizes.append(segment)
            segment = 0
    assert sizes == [6 * 1501]  # flushed before the 7th sentence would exceed 10,000
    assert segment == 2 * 1501  # still buffered
    p.flush(RID, 0.0)
    assert max(len(s.text) for s in p.segments) <= 10_000 and len(p.segments) == 2


def test_session_unit_limit_raises_before_sending() -> None:
    p = make(limits=KittaLimits(max_session_units=100))
    ready(p)
    p.send_text(RID, "a" * 60, 0.0)
    p.flush(RID, 0.0)
    p.data_to_send()
    with pytest.raises(KittaLimitError) as exc:
        p.send_text(RID, "b" * 41, 0.0)
    assert exc.value.limit == "max_session_units" and "100" in str(exc.value)
    assert p.data_to_send() == []  # nothing of it was queued
    assert p.units_sent == 60 and p.facts is not None and p.facts.characters_sent == 60
    p.send_text(RID, "b" * 40, 0.0)  # exactly at the limit is fine


def test_whitespace_only_flush_is_not_a_segment() -> None:
    p = make()
    ready(p)
    p.send_text(RID, "  ", 0.0)
    assert p.flush(RID, 0.0) is False
    assert unpack(p.data_to_send()) == [{"event": "text", "text": "  "}]
    assert p.segments == []


def test_audio_is_reordered_by_sequence() -> None:
    p = make()
    ready(p)
    p.send_text(RID, "Hi. ", 0.0)
    p.flush(RID, 0.0)
    p.data_to_send()
    assert feed(p, audio(1, b"\x01\x00")) == []  # held until 0 arrives
    assert audio_of(feed(p, audio(0, b"\x00\x00"))) == [b"\x00\x00", b"\x01\x00"]
    assert feed(p, audio(1, b"\x01\x00")) == []  # duplicate dropped
    assert feed(p, audio(3, b"\x03\x00")) == []  # gap...
    assert audio_of(feed(p, srv(event="usage", request_id=RID, units=3))) == [b"\x03\x00"]  # ...released
    assert p.segments[0].status is SegmentStatus.DONE and p.units_billed == 3


def test_audio_without_sequence_keeps_arrival_order() -> None:
    p = make()
    ready(p)
    out = feed(p, audio(None, b"\x05\x00")) + feed(p, audio(None, b"\x06\x00"))
    assert audio_of(out) == [b"\x05\x00", b"\x06\x00"]


def test_error_event_maps_to_typed_error() -> None:
    p = make(limits=KittaLimits())
    p.max_retries = 0
    ready(p)
    events = feed(
        p, srv(event="error", request_id=RID, code="internal_error", message="boom", retryable=True)
    )
    assert p.state is State.FAILED
    err = p.error
    assert isinstance(err, TTSAPIError)
    assert (err.provider, err.error_code, err.retryable, err.request_id) == (
        "kitta",
        "internal_error",
        True,
        RID,
    )
    assert events == [TurnFailed(RID, err), ConnectionFailed(err)]
    p.connection_lost(1011, "", 0.0)
    assert p.error is err and p.events_received() == []


@pytest.mark.parametrize(("code", "retryable"), [(1012, True), (1013, True), (1006, False), (1000, False)])
def test_close_codes(code: int, retryable: bool) -> None:
    p = make()
    ready(p)
    p.connection_lost(code, "bye", 0.0)
    err = p.error
    assert isinstance(err, KittaConnectionClosed)
    assert err.close_code == code and err.retryable is retryable
    assert isinstance(p.plan, RetryPlan) is retryable  # retried only for 1012/1013
    assert p.events_received()[-1] == ConnectionFailed(err)


def test_resume_replays_only_undelivered_segments() -> None:
    p = make()
    ready(p)
    for text in ("One. ", "Two. ", "Three. "):
        p.send_text(RID, text, 0.0)
        p.flush(RID, 0.0)
    p.send_text(RID, "Tail", 0.0)
    p.end_turn(RID, 0.0)
    p.data_to_send()
    feed(p, audio(0))
    feed(p, srv(event="usage", request_id=RID, units=4))  # "One." done
    feed(p, srv(event="error", code="overloaded", message="", retryable=True))
    assert [s.status for s in p.segments] == [
        SegmentStatus.DONE,
        SegmentStatus.PENDING,
        SegmentStatus.PENDING,
        SegmentStatus.PENDING,
    ]
    plan = p.plan
    assert isinstance(plan, RetryPlan) and len(plan.request.replay.segments) == 3
    q = make(turn=False)
    q.open_turn("req-1.r1", plan.request, 0.0)
    q.tick(plan.not_before)
    ready_frames = ready_frames_of(q)
    texts = [f.get("text") for f in ready_frames if f["event"] == "text"]
    assert texts == ["Two. ", "Three. ", "Tail"]
    assert [f["event"] for f in ready_frames][-1] == "stop"


def ready_frames_of(q: KittaProtocol) -> list[dict[str, Any]]:
    q.receive(srv(event="authenticated"), 0.0)
    q.data_to_send()
    q.receive(srv(event="ready", request_id=q.request_id, sample_rate=24000, channels=1, bit_depth=16), 0.0)
    return unpack(q.data_to_send())


def test_part_delivered_segment_is_never_replayed() -> None:
    p = make()
    ready(p)
    p.send_text(RID, "One. ", 0.0)
    p.flush(RID, 0.0)
    p.data_to_send()
    feed(p, audio(0))
    feed(p, srv(event="error", code="internal_error", message="", retryable=True))
    assert p.segments[0].status is SegmentStatus.DELIVERING
    assert p.error is not None and p.error.retryable and p.plan is None  # retryable, yet not retried


def test_local_close_is_terminal_and_silent() -> None:
    p = make()
    ready(p)
    p.send_text(RID, "x", 0.0)
    p.cancel_turn(RID, 0.0)
    assert p.state is State.CLOSED and p.close_request == (1000, "cancelled")
    assert p.events_received() == [TurnDone(RID, cancelled=True)]
    assert p.data_to_send() == []
    assert feed(p, audio(0)) == []
    p.connection_lost(1006, "", 0.0)
    assert p.events_received() == [] and p.error is None


def test_limits_are_validated() -> None:
    with pytest.raises(TTSInvalidOptionError):
        KittaLimits(max_text_chars=0)
    with pytest.raises(TTSInvalidOptionError):
        KittaLimits(max_text_chars=500, max_segment_chars=100)
    with pytest.raises(TTSInvalidOptionError) as exc:
        KittaLimits(max_text_chars=-1)
    assert exc.value.field == "max_text_chars" and exc.value.value == -1


@pytest.mark.parametrize("auth", ["header", "frame"])
def test_a_deferred_session_authenticates_but_holds_start_until_begin(auth: str) -> None:
    p = make(auth=auth, turn=False)
    assert p.accepts_turn
    first = unpack(p.data_to_send())
    assert [f["event"] for f in first] == (["auth"] if auth == "frame" else [])
    feed(p, srv(event="authenticated"))
    assert p.state is State.AUTHENTICATED and p.data_to_send() == []  # no start: no server session
    other = StartRequest(voice_id="other", model="fishaudio-s21pro-flash", format="pcm", language="en")
    p.open_turn("turn-7", KittaRequest(start=other), 0.0)
    (start,) = unpack(p.data_to_send())
    assert start["event"] == "start" and start["request_id"] == "turn-7"
    assert start["request"]["voice_id"] == "other" and start["request"]["language"] == "en"
    assert p.state is State.STARTED
    with pytest.raises(KittaProtocolError):
        p.open_turn("again", None, 0.0)  # only once


def test_begin_before_authenticated_sends_start_on_authenticated() -> None:
    p = make(turn=False)
    p.open_turn("turn-8", None, 0.0)
    assert p.data_to_send() == []
    feed(p, srv(event="authenticated"))
    assert [f["request_id"] for f in unpack(p.data_to_send())] == ["turn-8"]
