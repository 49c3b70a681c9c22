"""The emulator's ``/tts/websocket``, driven by a raw websockets client over loopback."""

from __future__ import annotations

import asyncio

import pytest
import websockets
from emu_wsclient import TONE, Session
from websockets.exceptions import InvalidStatus

from ttsbridge.emulator import Emulator, tone_duration, tone_frequency

S1 = "The first sentence of the turn."
S2 = "And here comes a second one!"
LONG = "This is a rather long sentence that renders into many chunks of tone audio. " * 3


def n_samples(text: str, rate: int = 22050) -> int:
    native = round(tone_duration(text) * 22050)
    return round(native * rate / 22050)


def assert_tone(audio_freq: float, text: str) -> None:
    assert audio_freq == pytest.approx(tone_frequency(text), abs=12.0)


# --- auth ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["query", "bearer", "x-api-key"])
async def test_auth_variants_accepted(emulator: Emulator, via: str) -> None:
    async with await Session.open(emulator, via=via, query="cartesia_version=2025-04-16") as s:
        await s.say("c1", "Hi.", cont=False)
        t = await s.turn("c1")
    assert t.final is not None and t.final["type"] == "done"
    assert_tone(t.frequency(), "Hi.")
    assert emulator.stats.ws_connections == 1


@pytest.mark.parametrize("key", ["", "sk_996_", "sk_123_not_ours", "nonsense"])
async def test_bad_or_missing_key_is_401_before_upgrade(emulator: Emulator, key: str) -> None:
    emulator.config.api_keys = {emulator.api_key}  # strict keys: by default any non-empty key is accepted
    url = emulator.ws_url + (f"?api_key={key}" if key else "")
    with pytest.raises(InvalidStatus) as info:
        await asyncio.wait_for(websockets.connect(url), 5)
    assert info.value.response.status_code == 401
    assert emulator.stats.ws_connections == 0
    assert emulator.stats.ws_rejected == 1


async def test_configured_key_set(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(api_keys={"sk_996_only_this"})
    assert emu.api_key == "sk_996_only_this"
    with pytest.raises(InvalidStatus):
        await asyncio.wait_for(websockets.connect(emu.ws_url + "?api_key=sk_996_another"), 5)
    async with await Session.open(emu, via="bearer") as s:
        await s.say("c", "ok", cont=False)
        assert (await s.turn("c")).final == {
            "type": "done",
            "context_id": "c",
            "done": True,
            "status_code": 200,
        }


# --- turn model ---------------------------------------------------------------------------------------------


async def test_done_only_after_continue_false_and_all_audio(emulator: Emulator) -> None:
    expected = (n_samples(S1) + n_samples(S2)) * 2
    async with await Session.open(emulator) as s:
        await s.say("t1", S1)
        await s.say("t1", S2)
        audio = b""
        while len(audio) < expected:
            t = await s.turn("t1", chunks=1)
            assert t.final is None, f"unexpected {t.final} before continue:false"
            audio += t.audio
        assert len(audio) == expected
        assert all(f["type"] == "chunk" for f in s.frames)  # no done yet
        await s.say("t1", "", cont=False)
        end = await s.turn("t1")
        assert end.final == {"type": "done", "context_id": "t1", "done": True, "status_code": 200}
        assert end.chunks == 0
    # the two sentences in order
    split = n_samples(S1) * 2
    from ttsbridge.audio.analysis import dominant_frequency

    assert_tone(dominant_frequency(audio[:split], 22050), S1)
    assert_tone(dominant_frequency(audio[split:], 22050), S2)


async def test_done_after_queued_sentences_render(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("t", LONG)
        await s.say("t", S1)
        await s.say("t", "", cont=False)
        t = await s.turn("t")
        assert t.final is not None and t.final["type"] == "done"
        assert len(t.audio) == (n_samples(LONG) + n_samples(S1)) * 2
        assert s.frames[-1]["type"] == "done"
        assert sum(1 for f in s.frames if f["type"] == "done") == 1
        # nothing else follows the done
        await s.say("probe", "x", cont=False)
        await s.turn("probe")
        assert [f["type"] for f in s.frames if f["context_id"] == "t"].count("done") == 1


async def test_transcripts_are_trimmed(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("t", "   Padded words.  \n", cont=False)
        t = await s.turn("t")
    assert_tone(t.frequency(), "Padded words.")
    assert len(t.audio) == n_samples("Padded words.") * 2


async def test_no_continue_field_means_end_of_turn(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.send({"context_id": "x", "transcript": "One shot.", "voice": TONE})
        t = await s.turn("x")
    assert t.final is not None and t.final["type"] == "done"
    assert t.chunks > 0


async def test_missing_context_id_gets_a_server_uuid(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say(None, "Who am I?", cont=False)
        first = await s.next_any()
        assert first is not None
        t = await s.turn(first["context_id"])
        ids = {f["context_id"] for f in s.frames}
    assert t.final is not None and t.final["type"] == "done"
    assert len(ids) == 1
    (cid,) = ids
    assert isinstance(cid, str) and len(cid) == 36  # a uuid


async def test_empty_end_of_turn_on_unknown_context_is_done(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("nothing", " ", cont=False)
        t = await s.turn("nothing")
    assert t.final is not None and t.final["type"] == "done" and t.chunks == 0


async def test_context_id_reusable_after_done(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("r", S1, cont=False)
        first = await s.turn("r")
        await s.say("r", S2, cont=False)
        second = await s.turn("r")
    assert first.final and second.final and second.final["type"] == "done"
    assert_tone(first.frequency(), S1)
    assert_tone(second.frequency(), S2)


async def test_contexts_render_independently_and_interleave(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("a", LONG, cont=False)
        await s.say("b", S2, cont=False)
        ta, tb = await asyncio.gather(s.turn("a"), s.turn("b"))
        order = [f["context_id"] for f in s.frames]
    assert ta.final and tb.final and ta.final["type"] == tb.final["type"] == "done"
    assert_tone(ta.frequency(), LONG.strip())
    assert_tone(tb.frequency(), S2)
    # b did not wait for a to finish: b's done comes before a's last chunk
    last_a = max(i for i, c in enumerate(order) if c == "a")
    first_b = order.index("b")
    assert first_b < last_a
    assert all("context_id" in f for f in s.frames)


async def test_extra_fields_are_accepted_and_ignored(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say(
            "x",
            S1,
            cont=False,
            add_timestamps=True,
            use_normalized_timestamps=False,
            language="en",
            max_buffer_delay_ms=0,
            duration=3,
            speed="normal",
            generation_config={"speed": 1.0},
            flush=True,
            something_new={"a": 1},
        )
        t = await s.turn("x")
    assert t.final is not None and t.final["type"] == "done"
    assert_tone(t.frequency(), S1)
    assert {f["type"] for f in s.frames} == {"chunk", "done"}  # no timestamps frames


async def test_chunk_frames_shape_and_chunk_ms_knob(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(chunk_ms=20.0)
    async with await Session.open(emu) as s:
        await s.say("c", S1, cont=False)
        t = await s.turn("c")
    chunk = t.frames[0]
    assert set(chunk) == {"type", "context_id", "done", "status_code", "data"}
    assert chunk["done"] is False and chunk["status_code"] == 206
    sizes = {len(__import__("base64").b64decode(f["data"])) for f in t.frames[:-2]}
    assert sizes == {441 * 2}  # 20 ms at 22050 Hz, PCM16


async def test_pacing_and_latency_knobs_keep_audio_intact(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(realtime_factor=40.0, first_chunk_latency_s=0.01)
    async with await Session.open(emu) as s:
        await s.say("p", S1)
        await s.say("p", S2, cont=False)
        t = await s.turn("p")
    assert t.final is not None and t.final["type"] == "done"
    assert len(t.audio) == (n_samples(S1) + n_samples(S2)) * 2


# --- output format ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("encoding", ["pcm_s16le", "pcm_mulaw", "pcm_alaw"])
@pytest.mark.parametrize("rate", [8000, 16000, 22050])
async def test_server_side_formats(emulator: Emulator, encoding: str, rate: int) -> None:
    fmt = {"container": "raw", "encoding": encoding, "sample_rate": rate}
    async with await Session.open(emulator) as s:
        await s.say("f", S1, cont=False, output_format=fmt)
        t = await s.turn("f")
    width = 2 if encoding == "pcm_s16le" else 1
    assert abs(len(t.audio) // width - n_samples(S1, rate)) <= 2
    assert_tone(t.frequency(rate, encoding), S1)


async def test_output_format_fixed_by_first_request_carrying_it(emulator: Emulator) -> None:
    mulaw16 = {"container": "raw", "encoding": "pcm_mulaw", "sample_rate": 16000}
    s16 = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050}
    bogus = {"container": "mp3", "encoding": "pcm_f32le", "sample_rate": 44100}
    async with await Session.open(emulator) as s:
        await s.send({"context_id": "a", "transcript": "", "continue": True, "voice": TONE})  # no format yet
        await s.say("a", S1, cont=False, output_format=mulaw16)
        await s.say("b", S2, cont=False, output_format=s16)
        await s.say("c", "later", cont=False, output_format=bogus)  # ignored, not validated
        ta, tb, tc = await asyncio.gather(s.turn("a"), s.turn("b"), s.turn("c"))
    assert len(ta.audio) == pytest.approx(n_samples(S1, 16000), abs=2)
    assert len(tb.audio) == pytest.approx(n_samples(S2, 16000), abs=2)  # 1 byte per sample: μ-law
    assert_tone(tb.frequency(16000, "pcm_mulaw"), S2)
    assert tc.final is not None and tc.final["type"] == "done"


@pytest.mark.parametrize(
    ("fmt", "code"),
    [
        ({"container": "wav", "encoding": "pcm_s16le", "sample_rate": 22050}, "unsupported_container"),
        ({"container": "raw", "encoding": "pcm_f32le", "sample_rate": 22050}, "unsupported_encoding"),
        ({"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}, "invalid_sample_rate"),
        ({"container": "raw", "encoding": "pcm_s16le", "sample_rate": "22050"}, "invalid_sample_rate"),
    ],
)
async def test_bad_output_format_closes_socket(emulator: Emulator, fmt: dict[str, object], code: str) -> None:
    async with await Session.open(emulator) as s:
        await s.say("f", S1, cont=False, output_format=fmt)
        t = await s.turn("f")
        assert t.final is not None
        assert t.final["error_code"] == code and t.final["status_code"] == 400
        assert await s.wait_closed() == (1008, code)
    assert t.chunks == 0


# --- errors -------------------------------------------------------------------------------------------------


def assert_error_frame(
    frame: dict[str, object] | None, code: str, status: int, context_id: str | None
) -> None:
    assert frame is not None
    assert set(frame) == {
        "type",
        "context_id",
        "done",
        "error_code",
        "status_code",
        "title",
        "message",
        "doc_url",
        "request_id",
    }
    assert frame["type"] == "error" and frame["done"] is True
    assert frame["error_code"] == code and frame["status_code"] == status
    assert frame["context_id"] == context_id
    assert frame["title"] and frame["message"] and frame["request_id"]
    assert str(frame["doc_url"]).startswith("https://")


async def test_unknown_model_closes_socket(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("m", S1, cont=False, model_id="sonic-3")
        t = await s.turn("m")
        assert_error_frame(t.final, "unknown_model", 400, "m")
        assert (await s.wait_closed())[0] == 1008


async def test_model_checked_on_first_request_only(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("a", S1, cont=False)
        await s.say("b", S2, cont=False, model_id="sonic-latest")
        tb = await s.turn("b")
    assert tb.final is not None and tb.final["type"] == "done"


async def test_omitted_model_is_fine(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.send({"context_id": "a", "transcript": S1, "voice": TONE})
        t = await s.turn("a")
    assert t.final is not None and t.final["type"] == "done"


async def test_voice_not_found_closes_socket_on_any_request(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("a", S1, cont=False)
        assert (await s.turn("a")).final["type"] == "done"  # type: ignore[index]
        await s.say("b", S2, cont=False, voice={"mode": "id", "id": "no-such-voice"})
        t = await s.turn("b")
        assert_error_frame(t.final, "voice_not_found", 404, "b")
        assert (await s.wait_closed())[0] == 1008


async def test_voice_mode_other_than_id_means_default(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("a", S1, cont=False, voice={"mode": "embedding", "embedding": [0.1, 0.2]})
        await s.say("b", S2, cont=False, voice="a-bare-string-id")
        ta, tb = await s.turn("a"), await s.turn("b")
    assert_tone(ta.frequency(), S1)  # the emulator fixture's default voice is tone
    assert_tone(tb.frequency(), S2)


async def test_generation_failed_ends_only_that_context(emulator: Emulator) -> None:
    emulator.add_fault(__import__("ttsbridge.emulator", fromlist=["Fault"]).Fault(trigger="BOOM"))
    async with await Session.open(emulator) as s:
        await s.say("ok", LONG, cont=False)
        await s.say("bad", "this goes BOOM", cont=False)
        t_ok, t_bad = await asyncio.gather(s.turn("ok"), s.turn("bad"))
        assert_error_frame(t_bad.final, "generation_failed", 500, "bad")
        assert t_ok.final is not None and t_ok.final["type"] == "done"
        assert len(t_ok.audio) == n_samples(LONG) * 2
        # the failed id is dead on this connection; the socket still serves new contexts
        await s.say("bad", "speak again", cont=False)
        await s.say("new", S1, cont=False)
        t_new = await s.turn("new")
        assert t_new.final is not None and t_new.final["type"] == "done"
        assert [f["type"] for f in s.frames if f["context_id"] == "bad"] == ["error"]
        assert not s.closed.is_set()


async def test_not_initialized_closes_with_1013(emulator: Emulator) -> None:
    from ttsbridge.emulator import Fault

    emulator.add_fault(Fault(action="error", error_code="not_initialized"))
    async with await Session.open(emulator) as s:
        await s.say("a", S1, cont=False)
        t = await s.turn("a")
        assert_error_frame(t.final, "not_initialized", 503, "a")
        assert (await s.wait_closed())[0] == 1013


async def test_invalid_json_and_binary_frames_keep_socket_open(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.send("{not json")
        e1 = await s.next(None)
        await s.send(b"\x00\x01")
        e2 = await s.next(None)
        await s.send("[1, 2]")
        e3 = await s.next(None)
        await s.send({"context_id": "n", "continue": True})  # no transcript
        e4 = await s.next("n")
        for e in (e1, e2, e3):
            assert_error_frame(e, "invalid_request", 400, None)
        assert_error_frame(e4, "invalid_request", 400, "n")
        await s.say("ok", S1, cont=False)
        assert (await s.turn("ok")).final["type"] == "done"  # type: ignore[index]
    msgs = emulator.stats.messages_of(1)
    assert msgs[0] == {"<invalid json>": "{not json"}


# --- billing ------------------------------------------------------------------------------------------------


async def test_credits_charged_and_insufficient_closes(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(credits=40)
    async with await Session.open(emu) as s:
        await s.say("a", "  twelve chars  ", cont=False)  # billed trimmed: "twelve chars" = 12
        assert (await s.turn("a")).final["type"] == "done"  # type: ignore[index]
        assert emu.config.credits == 28
        await s.say("b", "x" * 29, cont=False)
        t = await s.turn("b")
        assert_error_frame(t.final, "insufficient_credits", 402, "b")
        assert (await s.wait_closed())[0] == 1008
    assert emu.config.credits == 28
    assert emu.stats.credits_charged == 12


async def test_error_refunds_and_cancel_bills(make_emulator) -> None:  # type: ignore[no-untyped-def]
    from ttsbridge.emulator import Fault

    emu = await make_emulator(credits=1000)
    emu.add_fault(Fault(trigger="fail", after_chunks=1))
    async with await Session.open(emu, query="cancel_ack=true") as s:
        await s.say("a", "this will fail", cont=True)
        await s.say("a", "queued behind", cont=True)
        t = await s.turn("a")
        assert t.chunks == 1 and t.final is not None and t.final["error_code"] == "generation_failed"
        await emu.wait_until(lambda: emu.config.credits == 1000)  # both sentences refunded
        await s.say("c", LONG, cont=True)
        await s.turn("c", chunks=1)
        await s.cancel("c")
        await s.turn("c")
    assert emu.config.credits == 1000 - len(LONG.strip())  # cancelled text stays billed
    assert emu.stats.credits_refunded == len("this will fail") + len("queued behind")


# --- concurrency --------------------------------------------------------------------------------------------


async def test_concurrent_limit_drops_only_the_new_context(emulator: Emulator) -> None:
    emulator.config.max_concurrent_contexts = 1  # knobs are read live
    async with await Session.open(emulator) as s, await Session.open(emulator) as s2:
        await s.say("a", S1, cont=True)  # open, waiting for more text
        await s.turn("a", chunks=1)
        await s.say("b", S2, cont=False)
        tb = await s.turn("b")
        assert_error_frame(tb.final, "concurrent_limit", 429, "b")
        await s2.say("c", S2, cont=False)  # the limit is emulator-wide
        assert (await s2.turn("c")).final["error_code"] == "concurrent_limit"  # type: ignore[index]
        await s.say("b", "more text for the rejected id", cont=False)  # ignored: the id is dead
        await s.say("a", "", cont=False)
        ta = await s.turn("a")
        assert ta.final is not None and ta.final["type"] == "done"
        await s.say("d", S1, cont=False)  # a slot is free again
        assert (await s.turn("d")).final["type"] == "done"  # type: ignore[index]
        assert [f["type"] for f in s.frames if f["context_id"] == "b"] == ["error"]
    assert emulator.stats.contexts_rejected == 2


# --- cancel -------------------------------------------------------------------------------------------------


async def test_cancel_is_silent_by_default(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("long", LONG * 3, cont=True)
        await s.say("long", S1, cont=False)
        await s.turn("long", chunks=2)
        await s.cancel("long")
        await emulator.wait_until(lambda: emulator.stats.contexts_cancelled == 1)
        await s.say("probe", S2, cont=False)
        assert (await s.turn("probe")).final["type"] == "done"  # type: ignore[index]
        probe_done = next(
            i for i, f in enumerate(s.frames) if f["context_id"] == "probe" and f["type"] == "done"
        )
        long_frames = [(i, f) for i, f in enumerate(s.frames) if f["context_id"] == "long"]
    assert all(f["type"] == "chunk" for _, f in long_frames)  # no done, no error: silent
    assert all(i < probe_done for i, _ in long_frames)
    assert len(long_frames) < n_samples(LONG * 3) * 2 // 1764  # stopped early
    assert emulator.stats.cancels == 1


@pytest.mark.parametrize("flag", ["true", "1", "yes", "on", "TRUE"])
async def test_cancel_ack_done_cancelled(emulator: Emulator, flag: str) -> None:
    async with await Session.open(emulator, query=f"cancel_ack={flag}") as s:
        await s.say("x", LONG * 3, cont=True)
        await s.say("other", LONG, cont=False)
        await s.turn("x", chunks=1)
        await s.cancel("x")
        t = await s.turn("x")
        assert t.final == {
            "type": "done",
            "context_id": "x",
            "done": True,
            "status_code": 200,
            "cancelled": True,
        }
        t_other = await s.turn("other")  # other contexts go on
        assert t_other.final is not None and t_other.final["type"] == "done"
        ack = next(i for i, f in enumerate(s.frames) if f.get("cancelled"))
        assert not any(f["context_id"] == "x" for f in s.frames[ack + 1 :])  # no chunk after the ack
        await s.say("x", "late text for a cancelled context", cont=False)  # ignored
        await s.say("probe", S1, cont=False)
        await s.turn("probe")
        assert [f for f in s.frames if f["context_id"] == "x"][-1].get("cancelled") is True


async def test_cancel_ack_errors_keep_socket_open(emulator: Emulator) -> None:
    async with await Session.open(emulator, query="cancel_ack=true") as s:
        await s.cancel("never-opened")
        assert_error_frame(await s.next("never-opened"), "context_not_found", 404, "never-opened")
        await s.cancel(None)
        assert_error_frame(await s.next(None), "missing_context_id", 400, None)
        await s.say("done-already", S1, cont=False)
        await s.turn("done-already")
        await s.cancel("done-already")
        assert_error_frame(await s.next("done-already"), "context_not_found", 404, "done-already")
        await s.say("ok", S2, cont=False)
        assert (await s.turn("ok")).final["type"] == "done"  # type: ignore[index]
        assert not s.closed.is_set()


async def test_cancel_without_ack_sends_nothing_for_unknown_ids(emulator: Emulator) -> None:
    async with await Session.open(emulator, query="cancel_ack=false") as s:
        await s.cancel("nope")
        await s.cancel(None)
        await s.say("probe", S1, cont=False)
        await s.turn("probe")
    assert {f["context_id"] for f in s.frames} == {"probe"}


# --- idle timeout, drops ------------------------------------------------------------------------------------


async def test_idle_timeout_closes_socket(make_emulator) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(idle_timeout_s=0.2)
    async with await Session.open(emu) as s:
        await s.say("a", S1, cont=False)
        await s.turn("a")
        assert await s.wait_closed() == (1000, "idle timeout")


async def test_drop_connections(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s1, await Session.open(emulator) as s2:
        await emulator.wait_until(lambda: emulator.stats.ws_open == 2)
        assert await emulator.drop_connections() == 2
        assert (await s1.wait_closed())[0] is None  # no close frame
        assert (await s2.wait_closed())[0] is None
    assert emulator.stats.ws_open == 0
    assert emulator.stats.drops == 2


async def test_stats_log_messages_per_connection(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s1:
        await s1.say("a", "one", cont=False)
        await s1.turn("a")
    async with await Session.open(emulator) as s2:
        await s2.say("b", "two", cont=False)
        await s2.turn("b")
    st = emulator.stats
    assert [n for n, _ in st.messages] == [1, 2]
    assert st.messages_of(2)[0]["transcript"] == "two"
    assert st.contexts_started == st.contexts_done == 2


async def test_malformed_request_ends_an_active_context(emulator: Emulator) -> None:
    async with await Session.open(emulator) as s:
        await s.say("a", LONG * 2, cont=True)
        await s.turn("a", chunks=1)
        await s.send({"context_id": "a", "continue": True, "transcript": 42})
        t = await s.turn("a")  # chunks already in flight, then the error: no done
        assert_error_frame(t.final, "invalid_request", 400, "a")
        await s.say("probe", S1, cont=False)
        await s.turn("probe")
        assert [f["type"] for f in s.frames if f["context_id"] == "a"][-1] == "error"
    assert emulator.stats.contexts_done == 1  # only the probe


async def test_serve_hook(unused_tcp_port: int) -> None:
    from ttsbridge.emulator import TONE_VOICE_ID, EmulatorConfig, serve

    ready: asyncio.Queue[Emulator] = asyncio.Queue()
    task = asyncio.create_task(
        serve(
            EmulatorConfig(host="0.0.0.0", port=unused_tcp_port, default_voice=TONE_VOICE_ID),
            ready=ready.put_nowait,
        )
    )
    try:
        emu = await asyncio.wait_for(ready.get(), 5)
        assert emu.base_url == f"http://127.0.0.1:{unused_tcp_port}"
        async with await Session.open(emu) as s:
            await s.say("x", "served", cont=False)
            assert (await s.turn("x")).final["type"] == "done"  # type: ignore[index]
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
