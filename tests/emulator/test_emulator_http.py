"""The emulator's HTTP API: ``POST /tts/bytes`` and ``POST /tts/sse``, over aiohttp on loopback."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.audio.g711 import decode_to_pcm16
from ttsbridge.audio.wav import read_wav
from ttsbridge.emulator import Emulator, Fault, tone_duration, tone_frequency

TEXT = "Bytes over plain HTTP."
T = aiohttp.ClientTimeout(total=10)


def body(
    text: str = TEXT, *, container: str = "raw", encoding: str = "pcm_s16le", rate: int = 22050
) -> dict[str, Any]:
    return {
        "model_id": "gepard-1.0",
        "transcript": text,
        "voice": {"mode": "id", "id": "tone"},
        "output_format": {"container": container, "encoding": encoding, "sample_rate": rate},
        "language": "en",
    }


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=T) as session:
        yield session


def auth(emu: Emulator, via: str = "bearer") -> dict[str, str]:
    return {"Authorization": f"Bearer {emu.api_key}"} if via == "bearer" else {"X-API-Key": emu.api_key}


async def sse_events(resp: aiohttp.ClientResponse) -> AsyncIterator[dict[str, Any]]:
    async for line in resp.content:
        text = line.decode().strip()
        if text.startswith("data: "):
            yield json.loads(text[6:])


# --- /tts/bytes ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["bearer", "x-api-key"])
async def test_bytes_wav_pcm(emulator: Emulator, http: aiohttp.ClientSession, via: str) -> None:
    async with http.post(
        emulator.base_url + "/tts/bytes", json=body(container="wav"), headers=auth(emulator, via)
    ) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "audio/wav"
        data = await r.read()
    pcm, rate = read_wav(data)
    assert rate == 22050
    assert len(pcm) == round(tone_duration(TEXT) * 22050) * 2
    assert dominant_frequency(pcm, rate) == pytest.approx(tone_frequency(TEXT), abs=12)


@pytest.mark.parametrize(("encoding", "tag"), [("pcm_mulaw", 7), ("pcm_alaw", 6)])
async def test_bytes_wav_g711(
    emulator: Emulator, http: aiohttp.ClientSession, encoding: str, tag: int
) -> None:
    req = body(container="wav", encoding=encoding, rate=8000)
    async with http.post(emulator.base_url + "/tts/bytes", json=req, headers=auth(emulator)) as r:
        assert r.status == 200
        data = await r.read()
    assert data[:4] == b"RIFF" and data[8:16] == b"WAVEfmt "
    fmt_tag, channels, rate, byte_rate, align, bits = struct.unpack("<HHIIHH", data[20:36])
    assert (fmt_tag, channels, rate, byte_rate, align, bits) == (tag, 1, 8000, 8000, 1, 8)
    assert struct.unpack("<I", data[4:8])[0] == len(data) - 8
    idx = data.index(b"data")
    size = struct.unpack("<I", data[idx + 4 : idx + 8])[0]
    audio = data[idx + 8 :]
    assert size == len(audio)
    pcm = decode_to_pcm16(audio, encoding)
    assert dominant_frequency(pcm, 8000) == pytest.approx(tone_frequency(TEXT), abs=12)


async def test_bytes_raw_resampled(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.post(
        emulator.base_url + "/tts/bytes", json=body(rate=16000), headers=auth(emulator, "x-api-key")
    ) as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/octet-stream"
        pcm = await r.read()
    assert abs(len(pcm) // 2 - round(tone_duration(TEXT) * 16000)) <= 2
    assert dominant_frequency(pcm, 16000) == pytest.approx(tone_frequency(TEXT), abs=12)


@pytest.mark.parametrize(
    ("headers", "status", "error"),
    [({}, 401, "unauthorized"), ({"Authorization": "Bearer sk_nope"}, 401, "unauthorized")],
)
async def test_http_auth_errors(
    emulator: Emulator, http: aiohttp.ClientSession, headers: dict[str, str], status: int, error: str
) -> None:
    emulator.config.api_keys = {emulator.api_key}  # strict keys: by default any non-empty key is accepted
    for path in ("/tts/bytes", "/tts/sse"):
        async with http.post(emulator.base_url + path, json=body(), headers=headers) as r:
            assert r.status == status
            assert (await r.json())["error"] == error
    async with http.get(emulator.base_url + "/voices", headers=headers) as r:
        assert r.status == 401
    # a key in the query string is not an HTTP credential
    async with http.post(emulator.base_url + f"/tts/bytes?api_key={emulator.api_key}", json=body()) as r:
        assert r.status == 401


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"model_id": "sonic-3"}, "unknown_model"),
        ({"model_id": None}, "invalid_request"),
        ({"transcript": None}, "invalid_request"),
        ({"transcript": "   "}, "invalid_request"),
        (
            {"output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 44100}},
            "invalid_output_format",
        ),
        (
            {"output_format": {"container": "mp3", "encoding": "pcm_s16le", "sample_rate": 22050}},
            "invalid_output_format",
        ),
        (
            {"output_format": {"container": "raw", "encoding": "pcm_f32le", "sample_rate": 22050}},
            "invalid_output_format",
        ),
        ({"output_format": {"container": "raw", "encoding": "pcm_s16le"}}, "invalid_output_format"),
        ({"voice": {"mode": "id", "id": "nope"}}, "voice_not_found"),
    ],
)
async def test_bytes_bad_requests_are_400(
    emulator: Emulator, http: aiohttp.ClientSession, change: dict[str, Any], error: str
) -> None:
    req = {**body(), **change}
    async with http.post(emulator.base_url + "/tts/bytes", json=req, headers=auth(emulator)) as r:
        assert r.status == 400
        answer = await r.json()
    assert answer["error"] == error and answer["message"]


async def test_bytes_credits_402_and_refund_on_502(make_emulator, http: aiohttp.ClientSession) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(credits=len(TEXT) + 5)
    emu.add_fault(Fault(trigger="upstream", action="error", error_code="generation_failed"))
    async with http.post(emu.base_url + "/tts/bytes", json=body("upstream hiccup"), headers=auth(emu)) as r:
        assert r.status == 502
        assert await r.json() == {"error": "upstream_unavailable", "message": "synthesis backend error"}
    assert emu.config.credits == len(TEXT) + 5  # refunded
    async with http.post(emu.base_url + "/tts/bytes", json=body(), headers=auth(emu)) as r:
        assert r.status == 200
        await r.read()
    assert emu.config.credits == 5
    async with http.post(emu.base_url + "/tts/bytes", json=body(), headers=auth(emu)) as r:
        assert r.status == 402
        assert (await r.json())["error"] == "payment_required"


async def test_rate_limited_fault_has_retry_after(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    emulator.add_fault(Fault(trigger="limit me", action="error", error_code="rate_limited"))
    for path in ("/tts/bytes", "/tts/sse"):
        emulator.add_fault(Fault(trigger="limit me", action="error", error_code="rate_limited"))
        async with http.post(
            emulator.base_url + path, json=body("please limit me"), headers=auth(emulator)
        ) as r:
            assert r.status == 429
            assert r.headers["Retry-After"] == "1"
            assert (await r.json())["error"] == "rate_limited"


async def test_concurrency_limit_is_429(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    emulator.config.max_concurrent_contexts = 1
    emulator.add_fault(Fault(trigger="hold", action="stall", after_chunks=1))
    async with http.post(
        emulator.base_url + "/tts/sse", json=body("hold the slot"), headers=auth(emulator)
    ) as held:
        first = await anext(sse_events(held))
        assert first["type"] == "chunk"
        async with http.post(emulator.base_url + "/tts/bytes", json=body(), headers=auth(emulator)) as r:
            assert r.status == 429 and "Retry-After" in r.headers


async def test_bytes_drop_mid_body(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    emulator.add_fault(Fault(action="drop", after_chunks=2))
    async with http.post(emulator.base_url + "/tts/bytes", json=body(), headers=auth(emulator)) as r:
        assert r.status == 200
        with pytest.raises(aiohttp.ClientPayloadError):
            await r.read()


# --- /tts/sse -----------------------------------------------------------------------------------------------


async def test_sse_chunks_then_done(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    req = {**body(rate=8000, encoding="pcm_mulaw"), "context_id": "sse-1"}
    async with http.post(emulator.base_url + "/tts/sse", json=req, headers=auth(emulator)) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/event-stream")
        events = [e async for e in sse_events(r)]
    assert [e["type"] for e in events[:-1]] == ["chunk"] * (len(events) - 1)
    assert events[-1] == {"type": "done", "done": True, "status_code": 200, "context_id": "sse-1"}
    assert all(e["context_id"] == "sse-1" for e in events)
    audio = b"".join(base64.b64decode(e["data"]) for e in events[:-1])
    assert dominant_frequency(decode_to_pcm16(audio, "pcm_mulaw"), 8000) == pytest.approx(
        tone_frequency(TEXT), abs=12
    )


async def test_sse_streams_before_the_body_is_complete(
    emulator: Emulator, http: aiohttp.ClientSession
) -> None:
    # The server stalls after the first event: the client can only see it if events are sent as generated.
    emulator.add_fault(Fault(action="stall", after_chunks=1))
    async with http.post(emulator.base_url + "/tts/sse", json=body(), headers=auth(emulator)) as r:
        first = await asyncio.wait_for(anext(sse_events(r)), 5)
        assert first["type"] == "chunk"
        assert not r.content.at_eof()


async def test_sse_rejects_wav(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.post(
        emulator.base_url + "/tts/sse", json=body(container="wav"), headers=auth(emulator)
    ) as r:
        assert r.status == 400
        assert (await r.json())["error"] == "invalid_output_format"


async def test_sse_error_mid_stream(make_emulator, http: aiohttp.ClientSession) -> None:  # type: ignore[no-untyped-def]
    emu = await make_emulator(credits=100)
    emu.add_fault(Fault(action="error", error_code="generation_failed", after_chunks=2))
    async with http.post(emu.base_url + "/tts/sse", json=body(), headers=auth(emu)) as r:
        events = [e async for e in sse_events(r)]
    assert [e["type"] for e in events] == ["chunk", "chunk", "error"]
    assert events[-1]["error_code"] == "generation_failed" and events[-1]["status_code"] == 500
    await emu.wait_until(lambda: emu.config.credits == 100)


async def test_sse_close_fault_ends_without_done(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    emulator.add_fault(Fault(action="close", after_chunks=1))
    async with http.post(emulator.base_url + "/tts/sse", json=body(), headers=auth(emulator)) as r:
        events = [e async for e in sse_events(r)]
    assert [e["type"] for e in events] == ["chunk"]


async def test_http_stats(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.post(emulator.base_url + "/tts/bytes", json=body(), headers=auth(emulator)) as r:
        await r.read()
    async with http.post(emulator.base_url + "/tts/bytes", json=body(), headers={}) as r:
        await r.read()
    assert emulator.stats.http_requests == 2
    assert emulator.stats.credits_charged == len(TEXT)
    assert emulator.active_contexts == 0
