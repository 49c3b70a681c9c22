"""``nineninesix.TTS().synthesize()`` with the plugin's defaults and with an explicit voice, checked the way
livekit/agents' ``tests/test_tts.py::test_tts_synthesize`` checks a plugin (prewarm, ``max_retry=3``, one
request id, only the last frame final, frames at the declared rate, one metrics event); and a 402 that ends
one request without making the TTS unusable."""

from __future__ import annotations

import pytest
from livekit.agents import APIConnectOptions, APIStatusError
from lk_helpers import (
    S1,
    S2,
    Events,
    check_stream_events,
    check_synthesize_events,
    duration_of,
    make_tts,
    pcm_of,
    run_stream,
    run_synthesize,
    stream_until_error,
    tone_len,
    window,
)

from livekit.plugins import nineninesix
from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_frequency

#: the options livekit/agents' test_tts_synthesize uses
LIVEKIT_TEST_OPTIONS = APIConnectOptions(max_retry=3, timeout=5.0)
TEXT = f"{S1} {S2}"


def generation_requests(emu: Emulator) -> list[dict]:
    return [m for _, m in emu.stats.messages if "transcript" in m]


@pytest.mark.parametrize("voice", [None, TONE_VOICE_ID], ids=["default-voice", "explicit-voice"])
async def test_synthesize_as_livekits_test_tts_synthesize(emu: Emulator, voice: str | None) -> None:
    # emu's default voice is the tone voice, so both cases can be checked by frequency
    t = nineninesix.TTS(emu.api_key, base_url=emu.base_url, voice=voice)
    assert t.options.voice == voice
    t.prewarm()
    ev = Events(t)
    try:
        events = await run_synthesize(t, TEXT, conn_options=LIVEKIT_TEST_OPTIONS)
    finally:
        await t.aclose()

    check_synthesize_events(t, events)
    assert len(ev.metrics) == 1 and ev.errors == []
    assert duration_of(events) == pytest.approx(tone_len(TEXT), abs=0.05)
    mid = window(pcm_of(events), t.sample_rate, 0.25 * tone_len(TEXT), 0.5 * tone_len(TEXT))
    assert dominant_frequency(mid, t.sample_rate) == pytest.approx(tone_frequency(TEXT), rel=0.01)
    if voice is None:
        # POST /tts/sse requires a voice; the WebSocket speaks the server's default when none is named: the
        # text went out as one turn on the socket prewarm() opened, naming no voice
        assert emu.stats.http_requests == 0
        assert emu.stats.ws_connections == 1
        (request,) = [m for m in generation_requests(emu) if m["transcript"].strip()]
        assert "voice" not in request and request["transcript"].strip() == TEXT
    else:
        assert emu.stats.http_requests == 1
        assert generation_requests(emu) == []


async def test_default_voice_synthesize_follows_update_options(emu: Emulator) -> None:
    """The transport is chosen per request: naming a voice later moves synthesize() onto POST /tts/sse."""
    t = nineninesix.TTS(emu.api_key, base_url=emu.base_url)
    try:
        first = await run_synthesize(t, S1)
        t.update_options(voice=TONE_VOICE_ID)
        second = await run_synthesize(t, S2)
    finally:
        await t.aclose()
    check_synthesize_events(t, first)
    check_synthesize_events(t, second)
    assert (emu.stats.ws_connections, emu.stats.http_requests) == (1, 1)


async def test_out_of_credits_fails_one_request_once_and_the_next_one_speaks(emu: Emulator) -> None:
    """A 402 is not retryable within the request (retrying an empty balance at once is pointless, even with
    LiveKit's max_retry=3), and nothing in the plugin writes the TTS off: once the account is topped up the
    next stream() and synthesize() speak."""
    emu.config.credits = 0
    t = make_tts(emu)
    ev = Events(t)
    try:
        events, err = await stream_until_error(t, S1, LIVEKIT_TEST_OPTIONS)
        assert isinstance(err, APIStatusError) and err.status_code == 402 and err.retryable is False
        with pytest.raises(APIStatusError) as info:
            await run_synthesize(t, S1, conn_options=LIVEKIT_TEST_OPTIONS)
        assert info.value.status_code == 402 and info.value.retryable is False
        # one attempt each: one context on the socket, one HTTP request
        assert len({m["context_id"] for m in generation_requests(emu)}) == 1
        assert emu.stats.http_requests == 1
        assert [code for _, code in emu.stats.errors_sent] == ["insufficient_credits"] * 2
        assert [e.recoverable for e in ev.errors] == [False, False]
        emu.config.credits = None
        streamed = await run_stream(t, S2)
        synthesized = await run_synthesize(t, S2)
    finally:
        await t.aclose()
    assert events == []
    check_stream_events(t, streamed)
    check_synthesize_events(t, synthesized)
    assert len(ev.metrics) == 2
