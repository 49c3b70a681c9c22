"""The emulator's Kitta v2 endpoint, driven by a raw websockets client (no ttsbridge.kitta code)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import msgpack
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ttsbridge.emulator import (
    KITTA_EXAMPLE_MODEL,
    KITTA_EXAMPLE_VOICE_ID,
    TONE_VOICE_ID,
    Emulator,
    tone_duration,
)
from ttsbridge.emulator.kitta import KittaConfig, parse_kitta_fault

SUB = "realtime.tts.msgpack.v2"
WAIT = 5.0


class Raw:
    """A bare-bones v2 client: send maps, receive maps, see the close code."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    async def send(self, **obj: Any) -> None:
        await self.ws.send(msgpack.packb(obj, use_bin_type=True))

    async def recv(self) -> dict[str, Any]:
        data = await asyncio.wait_for(self.ws.recv(), WAIT)
        assert isinstance(data, bytes), "server frames are binary"
        return msgpack.unpackb(data, raw=False)

    async def recv_until(self, event: str) -> list[dict[str, Any]]:
        out = []
        while True:
            ev = await self.recv()
            out.append(ev)
            if ev["event"] in (event, "error"):
                return out

    async def error_and_close(self) -> tuple[dict[str, Any], int | None]:
        """Skipping audio, usage, ready and finish, the next event must be an error, then a close."""
        while True:
            ev = await self.recv()
            if ev["event"] not in ("audio", "usage", "ready", "finish"):
                break
        assert ev["event"] == "error", ev
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(self.ws.recv(), WAIT)
        return ev, self.ws.close_code

    async def start(self, request_id: str = "r-1", **request: Any) -> dict[str, Any]:
        req = {"voice_id": TONE_VOICE_ID, "model": "fishaudio-s21pro-flash", "format": "pcm", **request}
        await self.send(event="start", request_id=request_id, request=req)
        return await self.recv()


@pytest.fixture
def url(kemu: Emulator) -> str:
    return f"ws://{kemu.config.host}:{kemu.port}/v2/tts/live"


@contextlib.asynccontextmanager
async def raw(url: str, key: str | None, *, subprotocol: bool = True) -> AsyncIterator[Raw]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with connect(
        url,
        subprotocols=[SUB] if subprotocol else None,
        additional_headers=headers,
        open_timeout=WAIT,
        close_timeout=1,
    ) as ws:
        yield Raw(ws)


@contextlib.asynccontextmanager
async def authed(url: str, key: str) -> AsyncIterator[Raw]:
    async with raw(url, key) as r:
        assert await r.recv() == {"event": "authenticated"}
        yield r


async def http_status(
    url: str, key: str | None = None, *, subprotocol: bool = True
) -> tuple[int, dict[str, Any]]:
    with pytest.raises(InvalidStatus) as exc:
        async with raw(url, key, subprotocol=subprotocol):
            pass
    response = exc.value.response
    return response.status_code, json.loads(response.body or b"{}")


# -------------------------------------------------------------------------------------------------- handshake


async def test_subprotocol_is_required(url: str, kitta_key: str) -> None:
    status, body = await http_status(url, kitta_key, subprotocol=False)
    assert status == 400 and body["error"] == "subprotocol_required"


@pytest.mark.parametrize("query", ["token", "api_key"])
async def test_key_in_url_is_rejected_before_upgrade(
    kemu: Emulator, url: str, kitta_key: str, query: str
) -> None:
    status, body = await http_status(f"{url}?{query}={kitta_key}")
    assert status == 400 and body["error"] == "api_key_in_url"
    assert kemu.stats.kitta_connections == 0


async def test_bad_or_forbidden_key_is_an_http_answer(kemu: Emulator, url: str, kitta_key: str) -> None:
    # strict keys (by default any non-empty key is accepted)
    kemu.config.kitta.api_keys = {kitta_key, "kitta_no_realtime"}
    status, body = await http_status(url, "kitta_wrong" if kemu.config.kitta.api_keys else "not-a-kitta-key")
    assert status == 401 and body["error"] == "unauthorized"
    kemu.config.kitta.forbidden_keys = {"kitta_no_realtime"}
    status, body = await http_status(url, "kitta_no_realtime")
    assert status == 403 and body["error"] == "forbidden"


async def test_handshake_status_knob_and_concurrency_limit(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.handshake_status = 503
    status, _ = await http_status(url, kitta_key)
    assert status == 503
    kemu.config.kitta.handshake_status = None
    kemu.config.kitta.max_concurrent_sessions = 1
    async with authed(url, kitta_key):
        status, body = await http_status(url, kitta_key)
        assert status == 429 and body["error"] == "concurrency_limit"


async def test_header_auth_then_full_session_with_usage_and_finish(
    kemu: Emulator, url: str, kitta_key: str
) -> None:
    async with authed(url, kitta_key) as r:
        ready = await r.start("r-full")
        assert ready == {
            "event": "ready",
            "request_id": "r-full",
            "sample_rate": 24000,
            "channels": 1,
            "bit_depth": 16,
        }
        await r.send(event="text", text="Hello ")
        await r.send(event="text", text="there. ")
        await r.send(event="flush")
        events = await r.recv_until("usage")
        audio = [e for e in events if e["event"] == "audio"]
        assert audio and all(isinstance(e["audio"], bytes) for e in audio)
        assert [e["seq"] for e in audio] == list(range(len(audio)))
        assert all((e["sample_rate"], e["channels"], e["bit_depth"]) == (24000, 1, 16) for e in audio)
        assert sum(len(e["audio"]) for e in audio) == round(tone_duration("Hello there.") * 24000) * 2
        assert events[-1] == {"event": "usage", "request_id": "r-full", "units": 12, "total_units": 12}
        await r.send(event="flush")  # empty flush: not a segment
        await r.send(event="text", text="  Bye.  ")
        await r.send(event="stop")  # flushes the rest
        events = await r.recv_until("finish")
        usage = [e for e in events if e["event"] == "usage"]
        assert [u["units"] for u in usage] == [4]  # whitespace is not billed
        assert events[-1] == {"event": "finish", "request_id": "r-full", "units": 16}
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(r.ws.recv(), WAIT)
        assert r.ws.close_code == 1000
    assert kemu.stats.kitta_units_committed == 16 and kemu.stats.kitta_segment_texts == [
        "Hello there.",
        "Bye.",
    ]


async def test_frame_auth(kemu: Emulator, url: str, kitta_key: str) -> None:
    async with raw(url, None) as r:
        await r.send(event="auth", token=kitta_key)
        assert await r.recv() == {"event": "authenticated"}
        assert (await r.start("r-frame"))["event"] == "ready"
    assert kemu.stats.kitta_auth_modes == ["frame"]


async def test_frame_auth_with_a_bad_key(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.api_keys = {kitta_key}  # strict keys: by default any non-empty key is accepted
    async with raw(url, None) as r:
        await r.send(event="auth", token="nope")
        err, code = await r.error_and_close()
    assert err["code"] == "unauthorized" and err["retryable"] is False and code == 1008


async def test_auth_timeout(kemu: Emulator, url: str) -> None:
    kemu.config.kitta.auth_timeout_s = 0.2
    async with raw(url, None) as r:
        err, code = await r.error_and_close()
    assert err["code"] == "auth_timeout" and code == 1008


async def test_events_before_auth_are_refused(url: str) -> None:
    async with raw(url, None) as r:
        ev = await r.start("r-early")
        assert ev["event"] == "error" and ev["code"] == "unauthorized"
    async with raw(url, None) as r:
        await r.send(event="text", text="hi")
        err, _ = await r.error_and_close()
    assert err["code"] == "unauthorized"


async def test_idle_timeout(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.idle_timeout_s = 0.2
    async with authed(url, kitta_key) as r:
        await r.start("r-idle")
        err, code = await r.error_and_close()
    assert err["code"] == "idle_timeout" and err["request_id"] == "r-idle" and code == 1000


# ---------------------------------------------------------------------------------------------- strictness


@pytest.mark.parametrize(
    ("request_fields", "top", "code"),
    [
        ({"Speed": 1.0}, {}, "unsupported_parameter"),  # case-sensitive: unknown field
        ({}, {"extra": 1}, "unsupported_parameter"),
        ({"model": "gpt-voice"}, {}, "model_not_found"),
        ({"model": "qwen-tts", "speed": 1.0}, {}, "unsupported_parameter"),  # outside the capability matrix
        ({"model": "minimax-speech", "latency": "normal"}, {}, "unsupported_parameter"),
        ({"format": "opus"}, {}, "unsupported_parameter"),  # known to the page, not served here
        ({"speed": 9}, {}, "invalid_parameter"),
        ({"voice_id": "nobody"}, {}, "voice_not_found"),
        # the page's example voice, with another model than the page's example's
        ({"voice_id": KITTA_EXAMPLE_VOICE_ID, "model": "minimax-speech"}, {}, "voice_not_found"),
    ],
)
async def test_strict_start(
    url: str, kitta_key: str, request_fields: dict[str, Any], top: dict[str, Any], code: str
) -> None:
    async with authed(url, kitta_key) as r:
        req = {
            "voice_id": TONE_VOICE_ID,
            "model": "fishaudio-s21pro-flash",
            "format": "pcm",
            **request_fields,
        }
        await r.send(event="start", request_id="r-strict", request=req, **top)
        err, close = await r.error_and_close()
    assert err["code"] == code and err["retryable"] is False and close == 1008


async def test_the_pages_example_start_speaks(kemu: Emulator, url: str, kitta_key: str) -> None:
    # the page's `start` example as printed: its voice_id and model are a known voice of the emulator
    assert (KITTA_EXAMPLE_VOICE_ID, KITTA_EXAMPLE_MODEL) == (
        "00000000-0000-0000-0000-000000000000",
        "fishaudio-s21pro-flash",
    )
    async with authed(url, kitta_key) as r:
        ready = await r.start("r-page", voice_id=KITTA_EXAMPLE_VOICE_ID, model=KITTA_EXAMPLE_MODEL)
        assert ready["event"] == "ready"
        await r.send(event="text", text="Hello from Realtime TTS v2.")
        await r.send(event="stop")
        events = await r.recv_until("finish")
    audio = b"".join(e["audio"] for e in events if e["event"] == "audio")
    assert len(audio) > 24000 * 2 * 0.3  # speech (or tone), not silence of nothing
    assert events[-1]["units"] == 27
    # a Kitta voice only: Nineninesix's voice list does not name it
    assert KITTA_EXAMPLE_VOICE_ID not in kemu.voices


async def test_capabilities_that_are_supported(url: str, kitta_key: str) -> None:
    for i, fields in enumerate(
        [
            {"model": "qwen-tts", "language": "en", "instructions": "warm", "optimize_instructions": True},
            {"model": "minimax-speech", "speed": 1.2, "volume": -3, "emotion": "happy"},
            {"speed": 1, "volume": 0, "language": "en", "chunk_length": 200, "latency": "normal"},
        ]
    ):
        async with authed(url, kitta_key) as r:
            assert (await r.start(f"r-cap-{i}", **fields))["event"] == "ready"


async def test_reused_request_id_is_invalid_state(url: str, kitta_key: str) -> None:
    async with authed(url, kitta_key) as r:
        assert (await r.start("r-dup"))["event"] == "ready"
    async with authed(url, kitta_key) as r:
        await r.send(
            event="start",
            request_id="r-dup",
            request={"voice_id": TONE_VOICE_ID, "model": "fishaudio-s21pro-flash", "format": "pcm"},
        )
        err, _ = await r.error_and_close()
    assert err["code"] == "invalid_state"


@pytest.mark.parametrize(
    "frames",
    [
        [{"event": "text", "text": "too early"}],
        [{"event": "flush"}],
        [{"event": "stop"}],
        ["START", "START"],
        ["START", {"event": "stop"}, {"event": "text", "text": "after stop"}],
        ["START", {"event": "auth", "token": "again"}],
    ],
)
async def test_events_out_of_order_are_invalid_state(url: str, kitta_key: str, frames: list[Any]) -> None:
    async with authed(url, kitta_key) as r:
        for n, frame in enumerate(frames):
            if frame == "START":
                await r.send(
                    event="start",
                    request_id=f"r-order-{n}",
                    request={"voice_id": TONE_VOICE_ID, "model": "fishaudio-s21pro-flash", "format": "pcm"},
                )
            else:
                await r.send(**frame)
        err, _ = await r.error_and_close()
    assert err["code"] == "invalid_state"


async def test_text_frames_and_garbage_are_invalid_message(url: str, kitta_key: str) -> None:
    async with authed(url, kitta_key) as r:
        await r.ws.send('{"event": "start"}')
        err, _ = await r.error_and_close()
    assert err["code"] == "invalid_message"
    async with authed(url, kitta_key) as r:
        await r.ws.send(b"\xc1\xc1")
        err, _ = await r.error_and_close()
    assert err["code"] == "invalid_message"


# -------------------------------------------------------------------------------------------------- limits


async def test_text_event_limit(url: str, kitta_key: str) -> None:
    async with authed(url, kitta_key) as r:
        await r.start("r-long")
        await r.send(event="text", text="a" * 2000)  # at the limit: fine
        await r.send(event="text", text="a" * 2001)
        err, _ = await r.error_and_close()
    assert err["code"] == "text_too_long" and err["retryable"] is False


async def test_segment_limit(url: str, kitta_key: str) -> None:
    async with authed(url, kitta_key) as r:
        await r.start("r-seg")
        for _ in range(5):
            await r.send(event="text", text="a" * 2000)  # exactly 10,000
        await r.send(event="text", text="b")
        err, _ = await r.error_and_close()
    assert err["code"] == "segment_too_long"


async def test_session_unit_limit_and_refund(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.max_session_units = 20
    async with authed(url, kitta_key) as r:
        await r.start("r-quota")
        await r.send(event="text", text="Twelve chars")
        await r.send(event="flush")
        assert (await r.recv_until("usage"))[-1]["units"] == 12
        await r.send(event="text", text="Nine char")
        await r.send(event="flush")
        err, _ = await r.error_and_close()
    assert err["code"] == "quota_exceeded" and err["retryable"] is False
    assert kemu.stats.kitta_units_committed == 12


# -------------------------------------------------------------------------------------------------- faults


async def test_marker_retryable_error_before_audio_is_refunded(
    kemu: Emulator, url: str, kitta_key: str
) -> None:
    async with authed(url, kitta_key) as r:
        await r.start("r-f1")
        await r.send(event="text", text="Hello. [[kitta:error=internal_error:retryable]]")
        await r.send(event="flush")
        err, code = await r.error_and_close()
    assert (err["code"], err["retryable"], err["request_id"], code) == ("internal_error", True, "r-f1", 1011)
    assert kemu.stats.kitta_units_refunded == 6 and kemu.stats.kitta_units_committed == 0
    assert kemu.stats.kitta_audio_frames == 0


@pytest.mark.parametrize("close_code", [1012, 1013])
async def test_marker_close(url: str, kitta_key: str, close_code: int) -> None:
    async with authed(url, kitta_key) as r:
        await r.start(f"r-close-{close_code}")
        await r.send(event="text", text=f"Hi. [[kitta:close={close_code}]]")
        await r.send(event="flush")
        with pytest.raises(ConnectionClosed):
            while True:
                ev = await r.recv()
                assert ev["event"] != "audio"
        assert r.ws.close_code == close_code


async def test_marker_error_after_audio_commits_the_segment(kemu: Emulator, url: str, kitta_key: str) -> None:
    async with authed(url, kitta_key) as r:
        await r.start("r-after")
        await r.send(event="text", text="Hello there. [[kitta:error_after_audio]]")
        await r.send(event="flush")
        first = await r.recv()
        assert first["event"] == "audio"
        err, _ = await r.error_and_close()
    assert err["code"] == "internal_error" and err["retryable"] is True
    assert kemu.stats.kitta_units_committed == len("Hello there.") and kemu.stats.kitta_units_refunded == 0


async def test_marker_times_fires_only_n_times(url: str, kitta_key: str) -> None:
    text = "Once. [[kitta:error=overloaded:retryable:times=1]]"
    async with authed(url, kitta_key) as r:
        await r.start("r-t1")
        await r.send(event="text", text=text)
        await r.send(event="flush")
        err, _ = await r.error_and_close()
        assert err["code"] == "overloaded"
    async with authed(url, kitta_key) as r:
        await r.start("r-t2")
        await r.send(event="text", text=text)
        await r.send(event="flush")
        assert (await r.recv_until("usage"))[-1] == {
            "event": "usage",
            "request_id": "r-t2",
            "units": 5,
            "total_units": 5,
        }


async def test_session_faults_knob(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.session_faults = ["close=1012:at=start", "error=rate_limited:retryable"]
    async with authed(url, kitta_key) as r:
        await r.send(
            event="start",
            request_id="r-s1",
            request={"voice_id": TONE_VOICE_ID, "model": "fishaudio-s21pro-flash", "format": "pcm"},
        )
        with pytest.raises(ConnectionClosed):
            await r.recv()
        assert r.ws.close_code == 1012
    async with authed(url, kitta_key) as r:
        await r.start("r-s2")
        await r.send(event="text", text="Hi.")
        await r.send(event="flush")
        err, _ = await r.error_and_close()
        assert err["code"] == "rate_limited" and err["retryable"] is True
    async with authed(url, kitta_key) as r:  # the FIFO is empty now
        await r.start("r-s3")
        await r.send(event="text", text="Hi.")
        await r.send(event="stop")
        assert (await r.recv_until("finish"))[-1]["units"] == 3


async def test_client_leaving_refunds_queued_segments(kemu: Emulator, url: str, kitta_key: str) -> None:
    kemu.config.kitta.first_chunk_latency_s = 5.0  # nothing renders before the client leaves
    async with authed(url, kitta_key) as r:
        await r.start("r-leave")
        await r.send(event="text", text="One.")
        await r.send(event="flush")
        await r.send(event="text", text="Two.")
        await r.send(event="flush")
        await kemu.wait_until(lambda: kemu.stats.kitta_segments == 2, timeout=WAIT)
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes == 1, timeout=WAIT)
    assert kemu.stats.kitta_units_refunded == 8 and kemu.stats.kitta_units_committed == 0


def test_fault_spec_parsing() -> None:
    f = parse_kitta_fault("error=internal_error:retryable:after_audio:times=2")
    assert (f.action, f.code, f.retryable, f.after_audio, f.times) == (
        "error",
        "internal_error",
        True,
        True,
        2,
    )
    assert parse_kitta_fault("close=1013").close_code == 1013
    for bad in (
        "explode",
        "close=1006",
        "error",
        "error=x:sometimes",
        "stall:after_audio",
        "delay=1:after_audio",
    ):
        with pytest.raises(ValueError):
            parse_kitta_fault(bad)


def test_config_defaults() -> None:
    cfg = KittaConfig()
    assert cfg.max_text_chars == 2000 and cfg.max_segment_chars == 10_000 and cfg.max_session_units == 100_000
    assert cfg.is_valid_key(cfg.a_valid_key()) and cfg.is_valid_key("sk_996_x") and cfg.is_valid_key("any")
    assert not cfg.is_valid_key("") and not cfg.is_valid_key("  ") and not cfg.is_valid_key(None)
    assert not KittaConfig(api_keys={"only"}).is_valid_key("sk_996_x")
    assert cfg.formats == ("pcm", "wav", "mp3")
