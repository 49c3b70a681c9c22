"""The official Cartesia SDK (4.2) pointed at the emulator: bytes, SSE, voices, WebSocket contexts, cancel."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator

import pytest
from cartesia import AsyncCartesia

from ttsbridge.audio.analysis import dominant_frequency, tone
from ttsbridge.audio.wav import read_wav, wav_bytes
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency

TONE = {"mode": "id", "id": "tone"}
RAW22 = {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050}


@pytest.fixture
async def client(emulator: Emulator) -> AsyncIterator[AsyncCartesia]:
    c = AsyncCartesia(
        api_key=emulator.api_key,
        base_url=emulator.base_url,
        websocket_base_url=emulator.base_url.replace("http://", "ws://"),
        max_retries=0,
        timeout=10.0,
    )
    try:
        yield c
    finally:
        await c.close()


async def test_generate_bytes_wav(client: AsyncCartesia) -> None:
    text = "Hello from the Cartesia SDK."
    resp = await client.tts.generate(
        model_id="gepard-1.0",
        transcript=text,
        voice=TONE,  # type: ignore[arg-type]
        output_format={"container": "wav", "encoding": "pcm_s16le", "sample_rate": 16000},
    )
    pcm, rate = read_wav(await resp.read())
    assert rate == 16000
    assert abs(len(pcm) // 2 - round(tone_duration(text) * 16000)) <= 2
    assert dominant_frequency(pcm, rate) == pytest.approx(tone_frequency(text), abs=12)


async def test_generate_sse(client: AsyncCartesia) -> None:
    text = "Server-sent events, chunk by chunk."
    stream = await client.tts.generate_sse(
        model_id="gepard-1.0",
        transcript=text,
        voice=TONE,  # type: ignore[arg-type]
        output_format={"container": "raw", "encoding": "pcm_s16le", "sample_rate": 8000},
    )
    audio = b""
    types = []
    async for event in stream:
        types.append(event.type)
        if event.type == "chunk":
            audio += event.audio or b""
    assert types[-1] == "done" and set(types[:-1]) == {"chunk"}
    assert dominant_frequency(audio, 8000) == pytest.approx(tone_frequency(text), abs=12)


async def test_voices_list_get_clone(client: AsyncCartesia, emulator: Emulator) -> None:
    made = await client.voices.clone(
        clip=("clip.wav", wav_bytes(tone(660.0, 0.4, 16000), 16000), "audio/wav"),
        name="SDK clone",
        language="en",
        description="made by the Cartesia SDK",
    )
    assert made.name == "SDK clone" and made.id
    # auto-pagination: the SDK walks pages with starting_after until an empty page
    ids = [v.id async for v in client.voices.list(limit=1)]
    assert ids == [v.id for v in emulator.voices.all_voices()]
    assert made.id in ids
    voice = await client.voices.get(made.id)
    assert voice.name == "SDK clone" and voice.is_owner is True
    tone_voice = await client.voices.get("tone")
    assert tone_voice.id == "tone" and tone_voice.language == "en"


async def test_websocket_contexts(client: AsyncCartesia) -> None:
    texts = {"a": "The first context speaks.", "b": "The second context speaks at the same time."}
    async with client.tts.websocket_connect() as conn:
        ctxs = {
            k: conn.context(model_id="gepard-1.0", voice=TONE, output_format=RAW22)  # type: ignore[arg-type]
            for k in texts
        }
        for k, ctx in ctxs.items():
            await ctx.push(texts[k])
            await ctx.no_more_inputs()

        async def collect(k: str) -> tuple[bytes, str]:
            audio, last = b"", ""
            async for ev in ctxs[k].receive():
                last = ev.type
                if ev.type == "chunk":
                    audio += base64.b64decode(ev.data)  # type: ignore[union-attr]
            return audio, last

        results = await asyncio.wait_for(asyncio.gather(*(collect(k) for k in texts)), 10)
    for (audio, last), text in zip(results, texts.values(), strict=True):
        assert last == "done"
        assert len(audio) == round(tone_duration(text) * 22050) * 2
        assert dominant_frequency(audio, 22050) == pytest.approx(tone_frequency(text), abs=12)


async def test_websocket_cancel(client: AsyncCartesia, emulator: Emulator) -> None:
    long_text = "A long answer that the user interrupts before it is over. " * 4
    after = "The next turn, on a fresh context."
    async with client.tts.websocket_connect() as conn:
        first = conn.context(model_id="gepard-1.0", voice=TONE, output_format=RAW22)  # type: ignore[arg-type]
        await first.push(long_text)
        async for ev in first.receive():
            assert ev.type == "chunk"
            break
        await first.cancel()
        await emulator.wait_until(lambda: emulator.stats.contexts_cancelled == 1)
        second = conn.context(model_id="gepard-1.0", voice=TONE, output_format=RAW22)  # type: ignore[arg-type]
        await second.push(after)
        await second.no_more_inputs()
        audio = b""
        async for ev in second.receive():
            if ev.type == "chunk":
                audio += base64.b64decode(ev.data)  # type: ignore[union-attr]
    assert dominant_frequency(audio, 22050) == pytest.approx(tone_frequency(after), abs=12)
    assert emulator.stats.cancels == 1
