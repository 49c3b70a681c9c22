"""The Nineninesix pages' own example bodies, verbatim but for the URL and key, against the emulator.

``/tts/sse`` (and ``/tts/bytes``, "identical body"): the page's ``requestBody.example``. WebSocket: the
message page's template holds placeholders (``"<string>"``, ``sample_rate: 123``), so the body is built from
the field examples the AsyncAPI page gives (``transcript: Hello there.``, ``context_id: t1``, ``voice.id``)
plus the page's end-of-turn marker (an empty transcript with ``continue: false``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from emu_wsclient import Session

from ttsbridge.emulator import Emulator

#: A key a user might have: any non-empty key works with the default config.
USER_KEY = "sk_996_the_users_own_key"

#: /tts/sse page, requestBody.example (YAML on the page), as JSON.
SSE_EXAMPLE = json.loads(
    """{
      "model_id": "gepard-1.0",
      "transcript": "Streaming speech, chunk by chunk.",
      "voice": {"mode": "id", "id": "a0e99841-438c-4a64-b679-ae501e7d6091"},
      "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050}
    }"""
)

#: WebSocket page: a generation request from its field examples.
WS_EXAMPLE = json.loads(
    """{
      "model_id": "gepard-1.0",
      "transcript": "Hello there.",
      "context_id": "t1",
      "continue": true,
      "voice": {"mode": "id", "id": "a0e99841-438c-4a64-b679-ae501e7d6091"},
      "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050}
    }"""
)
WS_END_OF_TURN = {"transcript": "", "context_id": "t1", "continue": False}


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as session:
        yield session


def bearer(key: str = USER_KEY) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_the_example_voice_id_is_the_pages_one() -> None:
    from ttsbridge.emulator import EXAMPLE_VOICE_ID

    assert EXAMPLE_VOICE_ID == SSE_EXAMPLE["voice"]["id"] == WS_EXAMPLE["voice"]["id"]


async def test_sse_page_example_body(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    events: list[dict[str, Any]] = []
    async with http.post(emulator.base_url + "/tts/sse", json=SSE_EXAMPLE, headers=bearer()) as r:
        assert r.status == 200, await r.text()
        async for line in r.content:
            text = line.decode().strip()
            if text.startswith("data: "):
                events.append(json.loads(text[6:]))
    assert [e["type"] for e in events][-1] == "done"
    pcm = b"".join(base64.b64decode(e["data"]) for e in events if e["type"] == "chunk")
    assert len(pcm) // 2 > 22050 // 10, "the example voice speaks (at least 100 ms of audio)"


async def test_bytes_with_the_same_body(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    async with http.post(emulator.base_url + "/tts/bytes", json=SSE_EXAMPLE, headers=bearer()) as r:
        assert r.status == 200, await r.text()
        assert len(await r.read()) // 2 > 22050 // 10


async def test_websocket_page_example(emulator: Emulator) -> None:
    async with await Session.open(emulator, key=USER_KEY) as s:
        await s.send(WS_EXAMPLE)
        await s.send(WS_END_OF_TURN)
        turn = await s.turn("t1")
    assert turn.final == {"type": "done", "context_id": "t1", "done": True, "status_code": 200}
    assert turn.chunks >= 1 and len(turn.audio) // 2 > 22050 // 10


async def test_example_voice_is_listed(emulator: Emulator, http: aiohttp.ClientSession) -> None:
    voice_id = SSE_EXAMPLE["voice"]["id"]
    async with http.get(emulator.base_url + f"/voices/{voice_id}", headers=bearer()) as r:
        assert r.status == 200
        assert (await r.json())["id"] == voice_id
