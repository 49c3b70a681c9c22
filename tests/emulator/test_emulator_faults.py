"""Fault injection on the WebSocket: ``Fault`` objects and in-band markers."""

from __future__ import annotations

import asyncio

import pytest
from emu_wsclient import Session

from ttsbridge.emulator import Emulator, Fault, tone_frequency

TEXT = "Fault injection makes this turn misbehave on purpose."
OTHER = "A healthy context on the same socket."


async def test_drop_after_chunks_cuts_the_socket_without_close_frame(emulator: Emulator) -> None:
    emulator.add_fault(Fault(trigger="misbehave", action="drop", after_chunks=2))
    async with await Session.open(emulator) as s:
        await s.say("d", TEXT, cont=False)
        t = await s.turn("d")
        assert t.chunks == 2 and t.final is None
        assert (await s.wait_closed())[0] is None
    await emulator.wait_until(lambda: emulator.stats.ws_open == 0)
    assert emulator.stats.drops == 1
    assert emulator.stats.faults_fired == ["drop"]


async def test_stall_stops_one_context_and_keeps_the_socket(emulator: Emulator) -> None:
    emulator.add_fault(Fault(trigger="misbehave", action="stall", after_chunks=3))
    async with await Session.open(emulator, query="cancel_ack=on") as s:
        await s.say("st", TEXT, cont=False)
        t = await s.turn("st", chunks=3)
        assert t.chunks == 3
        await s.say("ok", OTHER, cont=False)
        ok = await s.turn("ok")
        assert ok.final is not None and ok.final["type"] == "done"
        # the stalled context is still open: nothing more came, and a cancel reaches it
        assert [f["type"] for f in s.frames if f["context_id"] == "st"] == ["chunk"] * 3
        await s.cancel("st")
        assert (await s.next("st"))["cancelled"] is True  # type: ignore[index]


async def test_close_fault_sends_close_frame(emulator: Emulator) -> None:
    emulator.add_fault(Fault(action="close", after_chunks=1, close_code=1012))
    async with await Session.open(emulator) as s:
        await s.say("c", TEXT, cont=False)
        t = await s.turn("c")
        assert t.chunks == 1 and t.final is None
        assert (await s.wait_closed())[0] == 1012


async def test_error_after_chunks(emulator: Emulator) -> None:
    emulator.add_fault(
        Fault(trigger="misbehave", action="error", error_code="generation_failed", after_chunks=3)
    )
    async with await Session.open(emulator) as s:
        await s.say("e", TEXT, cont=False)
        t = await s.turn("e")
    assert t.chunks == 3
    assert t.final is not None and t.final["error_code"] == "generation_failed"


async def test_error_fault_uses_catalog_effect(emulator: Emulator) -> None:
    emulator.add_fault(Fault(action="error", error_code="concurrent_limit"))
    async with await Session.open(emulator) as s:
        await s.say("a", TEXT, cont=False)
        ta = await s.turn("a")
        assert ta.final is not None and (ta.final["error_code"], ta.final["status_code"]) == (
            "concurrent_limit",
            429,
        )
        await s.say("b", OTHER, cont=False)  # socket still open
        assert (await s.turn("b")).final["type"] == "done"  # type: ignore[index]


async def test_after_chunks_beyond_audio_fires_after_last_chunk(emulator: Emulator) -> None:
    emulator.add_fault(Fault(trigger="Hi", action="error", after_chunks=10_000))
    async with await Session.open(emulator) as s:
        await s.say("h", "Hi", cont=False)
        t = await s.turn("h")
    assert t.chunks == 3  # 120 ms of audio in 40 ms chunks
    assert t.final is not None and t.final["type"] == "error"


async def test_times_and_trigger(emulator: Emulator) -> None:
    fault = emulator.add_fault(Fault(trigger="bad", action="error", times=2))
    async with await Session.open(emulator) as s:
        for i in range(3):
            await s.say(f"good{i}", "fine text", cont=False)
            await s.say(f"bad{i}", "bad text", cont=False)
        turns = await asyncio.gather(*(s.turn(f"{k}{i}") for i in range(3) for k in ("good", "bad")))
    types = {t.context_id: t.final["type"] for t in turns}  # type: ignore[index]
    assert types == {
        "good0": "done",
        "bad0": "error",
        "good1": "done",
        "bad1": "error",
        "good2": "done",
        "bad2": "done",
    }
    assert fault.fired == 2 and emulator.faults.faults == []


async def test_times_zero_fires_always_and_none_trigger_is_next_request(emulator: Emulator) -> None:
    emulator.add_fault(Fault(trigger="always", action="error", times=0))
    emulator.add_fault(Fault(trigger=None, action="error", error_code="generation_failed"))
    async with await Session.open(emulator) as s:
        await s.say("n1", "first request", cont=False)  # the None-trigger fault takes it
        await s.say("n2", "second request", cont=False)
        for i in range(3):
            await s.say(f"a{i}", "always fails", cont=False)
        t1, t2, *ta = await asyncio.gather(s.turn("n1"), s.turn("n2"), *(s.turn(f"a{i}") for i in range(3)))
    assert t1.final["type"] == "error" and t2.final["type"] == "done"  # type: ignore[index]
    assert all(t.final["type"] == "error" for t in ta)  # type: ignore[index]
    emulator.clear_faults()
    assert emulator.faults.faults == []


# --- in-band markers ----------------------------------------------------------------------------------------


async def test_inband_error_marker(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("m", "Please fail [[error:generation_failed]] now.", cont=False)
        await s.say("n", OTHER, cont=False)
        tm, tn = await s.turn("m"), await s.turn("n")
    assert tm.final is not None and tm.final["error_code"] == "generation_failed" and tm.chunks == 0
    assert tn.final is not None and tn.final["type"] == "done"


async def test_inband_error_marker_with_closing_code(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("m", "[[error:voice_not_found]]", cont=False)
        t = await s.turn("m")
        assert t.final is not None and t.final["error_code"] == "voice_not_found"
        assert (await s.wait_closed())[0] == 1008


async def test_inband_drop_marker_is_not_spoken(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("m", "Hello [[drop:2]] world, this is long enough.", cont=False)
        t = await s.turn("m")
        assert t.chunks == 2
        assert (await s.wait_closed())[0] is None
    from ttsbridge.audio.analysis import dominant_frequency

    # the audio is the text without the marker
    assert dominant_frequency(t.audio, 22050) == pytest.approx(
        tone_frequency("Hello world, this is long enough."), abs=25
    )


async def test_inband_stall_marker(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("m", "[[stall]] silence please", cont=False)
        await s.say("n", OTHER, cont=False)
        tn = await s.turn("n")
        assert tn.final is not None and tn.final["type"] == "done"
        assert not [f for f in s.frames if f["context_id"] == "m"]


async def test_inband_markers_off(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(inband_faults=False)
    text = "Literal [[drop:2]] marker."
    async with await Session.open(emu) as s:
        await s.say("m", text, cont=False)
        t = await s.turn("m")
    assert t.final is not None and t.final["type"] == "done"
    assert t.frequency() == pytest.approx(tone_frequency(text), abs=12)
