"""The pieces of carrier playback on their own: the pure book (marks, echoes, clears, limits, the drain's
bound) and the serializer wrapper (each carrier's mark message, its echo, its clear), no call needed."""

from __future__ import annotations

import json

import pytest
from pipecat.frames.frames import EndFrame, InputAudioRawFrame, InterruptionFrame, OutputAudioRawFrame
from pipecat.serializers.exotel import ExotelFrameSerializer
from pipecat.serializers.plivo import PlivoFrameSerializer
from pipecat.serializers.telnyx import TelnyxFrameSerializer
from pipecat.serializers.twilio import TwilioFrameSerializer

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.pipecat.telephony import PlaybackAcks, PlaybackMarkFrame
from ttsbridge.policy.playback import PlaybackBook, ReplyPlayback

# -- the book


def _sent(book: PlaybackBook, reply: ReplyPlayback, at: float, now: float, *, final: bool = False):  # type: ignore[no-untyped-def]
    mark = book.mark(reply, at, final=final, pushed_s=at)
    assert mark is not None
    book.sent(mark, now)
    return mark


def test_an_echo_is_a_played_position_and_plays_the_marks_before_it() -> None:
    book = PlaybackBook(margin_s=1.0)
    reply = ReplyPlayback("r")
    book.audio_sent(2.0, now=0.0)
    a = _sent(book, reply, 0.5, 0.0)
    b = _sent(book, reply, 1.0, 0.0)
    assert book.echoed(b.name) is b  # overtook a's echo (Telnyx: order not guaranteed)
    assert (a.state, b.state) == ("played", "played")
    assert reply.heard_s == 1.0 and reply.acked and not reply.finished
    assert book.echoed(a.name) is None  # already counted
    assert book.echoed("nope") is None  # not this call's
    assert book.played == 2 and book.acks_live


def test_marks_pending_at_a_clear_never_count_as_played() -> None:
    book = PlaybackBook()
    reply = ReplyPlayback("r")
    book.audio_sent(3.0, now=0.0)
    first = _sent(book, reply, 0.5, 0.0)
    book.echoed(first.name)
    later = _sent(book, reply, 2.0, 0.0)
    final = _sent(book, reply, 3.0, 0.0, final=True)
    assert book.cleared() == [later, final]
    # Twilio returns them at once after the clear: they come back as cleared, not played
    assert book.echoed(later.name) is later and later.state == "cleared"
    assert book.echoed(final.name) is final and final.state == "cleared"
    assert reply.heard_s == 0.5 and reply.cleared and not reply.finished
    assert book.played == 1 and book.pending == 0


def test_the_carrier_limit_keeps_a_slot_for_the_end_of_a_reply() -> None:
    book = PlaybackBook(max_pending=3, min_gap_s=0.1)
    reply = ReplyPlayback("r")
    assert book.mark(reply, 0.0) is not None
    assert book.mark(reply, 0.05) is None  # closer than min_gap_s
    assert book.mark(reply, 0.2) is not None
    assert book.mark(reply, 0.4) is None  # the last slot is the final mark's
    final = book.mark(reply, 0.45, final=True)
    assert final is not None and reply.end_s == 0.45
    assert book.mark(reply, 0.9, final=True) is None  # full
    with pytest.raises(ValueError):
        PlaybackBook(max_pending=1)


def test_marks_not_echoed_within_the_margin_are_lost_and_a_call_without_echoes_is_silent() -> None:
    book = PlaybackBook(margin_s=1.0)
    reply = ReplyPlayback("r")
    book.audio_sent(0.5, now=10.0)
    mark = _sent(book, reply, 0.5, 10.0)
    assert mark.play_end == 10.5 and book.next_expiry() == 11.5
    assert book.expire(11.4) == []
    assert book.expire(11.5) == [mark] and mark.state == "lost"
    assert book.silent and not book.acks_live and reply.lost
    # a late echo is late, not wrong: the audio did play
    assert book.echoed(mark.name) is mark and mark.state == "played"
    assert not book.silent and book.lost == 0


def test_the_drain_waits_for_the_audio_sent_plus_the_margin_and_no_longer() -> None:
    book = PlaybackBook(margin_s=1.0)
    reply = ReplyPlayback("r")
    assert book.drain_deadline(since=5.0) is None  # nothing out
    book.audio_sent(2.0, now=5.0)  # the carrier can have played it by 7.0
    unsent = book.mark(reply, 3.0, final=True, pushed_s=3.0)  # no mark sent yet: all 3 s it follows count
    assert unsent is not None
    assert book.drain_deadline(since=5.0) == pytest.approx(7.0 + 3.0 + 1.0)
    book.audio_sent(1.0, now=5.5)
    book.sent(unsent, now=5.5)
    assert book.drain_deadline(since=5.0) == pytest.approx(8.0 + 1.0)
    assert book.drain_deadline(since=5.0) == book.drain_deadline(since=5.0)  # the clock does not move it
    book.echoed(unsent.name)
    assert book.drain_deadline(since=5.0) is None and reply.finished


def test_audio_held_back_on_the_wire_shifts_what_a_mark_certifies() -> None:
    book = PlaybackBook()
    reply = ReplyPlayback("r")
    mark = book.mark(reply, 1.0)
    assert mark is not None
    mark.pts = 2_000_000_000
    book.sent(mark, now=0.0, behind_s=0.1)  # 100 ms before it still in a resampler
    assert mark.position_s == pytest.approx(0.9) and mark.pts == 1_900_000_000
    book.echoed(mark.name)
    assert reply.heard_s == pytest.approx(0.9) and book.acked_pts == 1_900_000_000


def test_a_hang_up_resolves_every_mark_out() -> None:
    book = PlaybackBook()
    reply = ReplyPlayback("r")
    mark = _sent(book, reply, 0.0, 0.0)
    assert book.hung_up() == [mark] and mark.state == "lost" and book.ended
    assert book.mark(reply, 1.0) is None


# -- the serializer wrapper


def _carriers() -> dict[str, object]:
    return {
        "twilio": TwilioFrameSerializer("MZ1", params=TwilioFrameSerializer.InputParams(auto_hang_up=False)),
        "telnyx": TelnyxFrameSerializer(
            "T1", "PCMU", "PCMU", params=TelnyxFrameSerializer.InputParams(auto_hang_up=False)
        ),
        "exotel": ExotelFrameSerializer("E1"),
        "plivo": PlivoFrameSerializer("P1", params=PlivoFrameSerializer.InputParams(auto_hang_up=False)),
    }


MARKS = {
    "twilio": (
        {"event": "mark", "streamSid": "MZ1", "mark": {"name": "tb1"}},
        {"event": "mark", "sequenceNumber": "4", "streamSid": "MZ1", "mark": {"name": "tb1"}},
    ),
    "telnyx": (
        {"event": "mark", "mark": {"name": "tb1"}},
        {"event": "mark", "sequence_number": "4", "stream_id": "T1", "mark": {"name": "tb1"}},
    ),
    "exotel": (
        {"event": "mark", "stream_sid": "E1", "mark": {"name": "tb1"}},
        {"event": "mark", "sequence_number": 4, "stream_sid": "E1", "mark": {"name": "tb1"}},
    ),
    "plivo": (
        {"event": "checkpoint", "streamId": "P1", "name": "tb1"},
        {"event": "playedStream", "sequenceNumber": 4, "streamId": "P1", "name": "tb1"},
    ),
}


@pytest.mark.parametrize("carrier", list(MARKS))
async def test_each_carrier_gets_its_own_mark_and_its_echo_is_read(carrier: str) -> None:
    acks = PlaybackAcks(_carriers()[carrier])  # type: ignore[arg-type]
    assert acks.carrier == carrier
    reply = ReplyPlayback("r")
    mark = acks.call.book.mark(reply, 0.0)
    assert mark is not None
    out = await acks.serialize(PlaybackMarkFrame(message={}, mark=mark))
    sent, echo = MARKS[carrier]
    assert json.loads(out) == sent  # type: ignore[arg-type]
    assert await acks.deserialize(json.dumps(echo)) is None
    assert mark.state == "played" and reply.heard_s == 0.0
    # a mark of another call is not sent
    other = PlaybackAcks(_carriers()[carrier])  # type: ignore[arg-type]
    stray = other.call.book.mark(ReplyPlayback("x"), 0.0)
    assert await acks.serialize(PlaybackMarkFrame(message={}, mark=stray)) is None


async def test_the_wrapped_serializer_does_the_rest() -> None:
    inner = TwilioFrameSerializer("MZ1", params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
    acks = PlaybackAcks(inner)

    class _Setup:
        audio_in_sample_rate = 8000
        pipeline_worker = None

    await acks.setup(_Setup())  # type: ignore[arg-type]
    media = json.dumps({"event": "media", "streamSid": "MZ1", "media": {"payload": "//////////8="}})
    frame = await acks.deserialize(media)
    assert isinstance(frame, InputAudioRawFrame) and len(frame.audio) == 16
    out = await acks.serialize(OutputAudioRawFrame(b"\x00\x00" * 160, 8000, 1))
    assert json.loads(out)["event"] == "media"  # type: ignore[arg-type]
    assert acks.call.book.audio_sent_s == pytest.approx(0.02)
    reply = ReplyPlayback("r")
    mark = acks.call.book.mark(reply, 0.0)
    assert mark is not None
    await acks.serialize(PlaybackMarkFrame(message={}, mark=mark))
    assert json.loads(await acks.serialize(InterruptionFrame())) == {"event": "clear", "streamSid": "MZ1"}  # type: ignore[arg-type]
    assert mark.state == "cleared"
    await acks.deserialize(json.dumps({"event": "mark", "streamSid": "MZ1", "mark": {"name": mark.name}}))
    assert mark.state == "cleared" and acks.call.cleared_echoes == 1
    await acks.deserialize(json.dumps({"event": "stop", "streamSid": "MZ1"}))
    assert acks.call.book.ended
    assert await acks.serialize(EndFrame()) is None  # nothing out: no wait; auto_hang_up off
    assert acks.call.drains[-1].reason == "hung-up"


def test_bad_arguments_name_the_field() -> None:
    twilio = TwilioFrameSerializer("MZ1", params=TwilioFrameSerializer.InputParams(auto_hang_up=False))
    with pytest.raises(TTSInvalidOptionError, match="serializer"):
        PlaybackAcks(object())  # type: ignore[arg-type]
    from pipecat.serializers.protobuf import ProtobufFrameSerializer

    with pytest.raises(TTSInvalidOptionError, match="serializer"):
        PlaybackAcks(ProtobufFrameSerializer())
    with pytest.raises(TTSInvalidOptionError, match="margin_s"):
        PlaybackAcks(twilio, margin_s=-1)
    with pytest.raises(TTSInvalidOptionError, match="max_pending_marks"):
        PlaybackAcks(twilio, max_pending_marks=1)
