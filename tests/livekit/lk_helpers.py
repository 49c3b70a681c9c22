"""Helpers for the LiveKit plugin tests (the checks of livekit/agents' tests/test_tts.py, reimplemented)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, APIError, tts
from livekit.agents.types import USERDATA_TIMED_TRANSCRIPT, TimedString

from livekit import rtc
from livekit.plugins import nineninesix
from ttsbridge.emulator import TONE_VOICE_ID, Emulator

#: fast retries, short timeouts: failures are found in well under a second
FAST = APIConnectOptions(max_retry=0, retry_interval=0.0, timeout=5.0)
BOUND = 15.0  # outer bound on any single test wait

S1 = "Hello there, how are you doing today?"
S2 = "I can help you with your booking."
S3 = "Let me check that for you right now."


def make_tts(emu: Emulator, **kw: Any) -> nineninesix.TTS:
    kw.setdefault("voice", TONE_VOICE_ID)
    return nineninesix.TTS(emu.api_key, base_url=emu.base_url, **kw)


class Events:
    """Collects a TTS's ``metrics_collected`` and ``error`` events."""

    def __init__(self, t: tts.TTS) -> None:
        self.metrics: list[Any] = []
        self.errors: list[Any] = []
        t.on("metrics_collected", self.metrics.append)
        t.on("error", self.errors.append)


async def run_stream(
    t: tts.TTS,
    text: str | Sequence[str],
    *,
    conn_options: APIConnectOptions = FAST,
    by_word: bool = True,
) -> list[tts.SynthesizedAudio]:
    """Push ``text`` word by word (like an LLM), end the input, collect every event (bounded)."""

    async def run() -> list[tts.SynthesizedAudio]:
        async with t.stream(conn_options=conn_options) as stream:
            pieces: list[str] = []
            for seg in [text] if isinstance(text, str) else list(text):
                pieces += [w + " " for w in seg.split(" ")] if by_word else [seg]
            for p in pieces:
                stream.push_text(p)
            stream.end_input()
            return [ev async for ev in stream]

    return await asyncio.wait_for(run(), BOUND)


async def run_synthesize(
    t: tts.TTS, text: str, *, conn_options: APIConnectOptions = FAST
) -> list[tts.SynthesizedAudio]:
    async def run() -> list[tts.SynthesizedAudio]:
        async with t.synthesize(text, conn_options=conn_options) as stream:
            return [ev async for ev in stream]

    return await asyncio.wait_for(run(), BOUND)


def check_stream_events(t: tts.TTS, events: list[tts.SynthesizedAudio]) -> None:
    """One request_id, one segment, only the last frame final, frames 0-250 ms, rate/channels as declared."""
    assert events, "no audio"
    assert len({e.request_id for e in events}) == 1 and events[0].request_id
    assert all(e.segment_id for e in events)
    by_segment: dict[str, list[tts.SynthesizedAudio]] = defaultdict(list)
    for e in events:
        by_segment[e.segment_id].append(e)
    assert len(by_segment) == 1, "one segment per stream"
    assert events[-1].is_final
    assert not any(e.is_final for e in events[:-1]), "only the last frame is final"
    assert all(0 < e.frame.duration < 0.25 for e in events), [e.frame.duration for e in events]
    assert all(e.frame.sample_rate == t.sample_rate for e in events)
    assert all(e.frame.num_channels == t.num_channels == 1 for e in events)


def check_synthesize_events(t: tts.TTS, events: list[tts.SynthesizedAudio]) -> None:
    """What livekit/agents' ``test_tts_synthesize`` checks of one ``synthesize()``: one request_id, only the
    last frame final, the last two frames non-empty and under 250 ms, every frame at the declared rate and
    channel count (the metrics event is counted by the caller)."""
    assert len(events) >= 2, "expected at least two frames"
    assert events[0].request_id and all(e.request_id == events[0].request_id for e in events)
    assert events[-1].is_final
    assert not any(e.is_final for e in events[:-1]), "only the last frame is final"
    assert 0 < events[-2].frame.duration < 0.25 and 0 < events[-1].frame.duration < 0.25
    assert all(0 < e.frame.duration < 0.25 for e in events), [e.frame.duration for e in events]
    assert all(e.frame.sample_rate == t.sample_rate for e in events)
    assert all(e.frame.num_channels == t.num_channels == 1 for e in events)


def pcm_of(events: list[tts.SynthesizedAudio]) -> bytes:
    return b"".join(e.frame.data.tobytes() for e in events)


def duration_of(events: list[tts.SynthesizedAudio]) -> float:
    return sum(e.frame.duration for e in events)


def timed_words(events: list[tts.SynthesizedAudio]) -> list[TimedString]:
    return [w for e in events for w in e.frame.userdata.get(USERDATA_TIMED_TRANSCRIPT, [])]


def window(pcm: bytes, rate: int, start_s: float, dur_s: float) -> bytes:
    a = int(start_s * rate) * 2
    return pcm[a : a + int(dur_s * rate) * 2]


def tone_len(text: str) -> float:
    """Duration the emulator's tone voice gives a transcript (60 ms per character, at least 100 ms)."""
    return max(0.1, 0.06 * len(text.strip()))


def combined(events: list[tts.SynthesizedAudio]) -> rtc.AudioFrame:
    return rtc.combine_audio_frames([e.frame for e in events])


async def stream_until_error(
    t: tts.TTS, text: str, conn_options: APIConnectOptions
) -> tuple[list[tts.SynthesizedAudio], BaseException]:
    """Run one stream that must fail; return the frames delivered before the failure and the error."""
    events: list[tts.SynthesizedAudio] = []

    async def run() -> None:
        async with t.stream(conn_options=conn_options) as stream:
            stream.push_text(text)
            stream.end_input()
            async for ev in stream:
                events.append(ev)

    with pytest.raises(APIError) as info:
        await asyncio.wait_for(run(), BOUND)
    return events, info.value


async def synthesize_until_error(
    t: tts.TTS, text: str, conn_options: APIConnectOptions
) -> tuple[list[tts.SynthesizedAudio], BaseException]:
    """Run one ``synthesize()`` that must fail; return the frames delivered before the failure and the error."""
    events: list[tts.SynthesizedAudio] = []

    async def run() -> None:
        async with t.synthesize(text, conn_options=conn_options) as stream:
            async for ev in stream:
                events.append(ev)

    with pytest.raises(APIError) as info:
        await asyncio.wait_for(run(), BOUND)
    return events, info.value
