"""LiveKit's own Cartesia plugin (``livekit.plugins.cartesia.TTS(base_url=...)``) speaks to the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp
import pytest

from livekit.plugins import cartesia
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest.fixture
async def make_tts(http: aiohttp.ClientSession) -> AsyncIterator[object]:
    made: list[cartesia.TTS] = []

    def _make(emu: Emulator, rate: int) -> cartesia.TTS:
        tts = cartesia.TTS(
            api_key=emu.api_key,
            base_url=emu.base_url,
            voice="tone",
            model="gepard-1.0",
            sample_rate=rate,
            http_session=http,
        )
        made.append(tts)
        return tts

    yield _make
    for tts in made:
        await tts.aclose()


@pytest.mark.parametrize("rate", [16000, 22050])
async def test_synthesize(emulator: Emulator, make_tts, rate: int) -> None:  # type: ignore[no-untyped-def]
    text = "Hello from LiveKit."
    tts = make_tts(emulator, rate)
    audio = b""
    async with tts.synthesize(text) as stream:
        async for ev in stream:
            assert ev.frame.sample_rate == rate
            audio += bytes(ev.frame.data)
    n = round(tone_duration(text) * rate)
    assert n <= len(audio) // 2 <= n + rate // 5  # the emitter may pad its last frame
    assert dominant_frequency(audio[: n * 2], rate) == pytest.approx(tone_frequency(text), abs=12)
    assert emulator.stats.http_requests == 1


@pytest.mark.parametrize("rate", [16000, 22050])
async def test_stream(emulator: Emulator, make_tts, rate: int) -> None:  # type: ignore[no-untyped-def]
    tts = make_tts(emulator, rate)
    stream = tts.stream()
    stream.push_text("Streaming through the LiveKit plugin. ")
    stream.push_text("Second sentence here.")
    stream.end_input()
    audio = b""
    segments = set()
    async for ev in stream:
        audio += bytes(ev.frame.data)
        segments.add(ev.segment_id)
    await stream.aclose()
    msgs = emulator.stats.messages_of(1)
    transcripts = [m["transcript"].strip() for m in msgs if m["transcript"].strip()]
    assert transcripts and msgs[-1]["continue"] is False
    assert len({m["context_id"] for m in msgs}) == 1 and len(segments) == 1
    n0 = round(tone_duration(transcripts[0]) * rate)
    assert dominant_frequency(audio[: n0 * 2], rate) == pytest.approx(tone_frequency(transcripts[0]), abs=12)
    total = sum(round(tone_duration(t) * rate) for t in transcripts)
    assert total <= len(audio) // 2 <= total + rate // 5
