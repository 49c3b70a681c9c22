"""``tts.FallbackAdapter([nineninesix.TTS, kitta.TTS])`` inside a real ``AgentSession``.

The primary fails before any audio (a socket-closing error, a dropped socket, a turn that never gets audio,
an unreachable server): the backup speaks the same reply, once. It fails after audio: nothing is replayed.
Once the primary recovers (LiveKit's background probe succeeds), the next reply is the primary's again. What
the adapter decides from (``retryable``) is what our errors carry.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from livekit.agents import APIConnectOptions, tts
from livekit.agents.tts.fallback_adapter import AvailabilityChangedEvent
from livekit.agents.voice.agent_session import SessionConnectOptions
from session_helpers import (
    BOUND,
    Harness,
    agent_session,
    make_provider_tts,
    sentences,
)

from heard import prefix_error, sentence_frequencies
from livekit.plugins import nineninesix
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, Fault, tone_duration, tone_frequency

FIRST = "Hello! How can I help?"
SECOND = "Of course. What else can I do?"
THIRD = "Thanks for calling. Goodbye!"
LONG = "Sure, I can help with that. Your table for four is booked for eight tonight."
REPLIES = {"one": FIRST, "two": SECOND, "three": THIRD, "long": LONG}

#: the turn's bound (first audio, gaps): a stalled turn fails in 1 s; retries are quick
CONN = SessionConnectOptions(
    tts_conn_options=APIConnectOptions(max_retry=0, retry_interval=0.05, timeout=1.0)
)


class Availability:
    """The adapter's ``tts_availability_changed`` events, waitable."""

    def __init__(self, adapter: tts.FallbackAdapter) -> None:
        self.events: list[tuple[str, bool]] = []
        self._changed = asyncio.Event()
        adapter.on("tts_availability_changed", self._on)

    def _on(self, ev: AvailabilityChangedEvent) -> None:
        self.events.append((ev.tts.provider, ev.available))
        self._changed.set()

    async def wait_for(self, provider: str, available: bool) -> None:
        async def _wait() -> None:
            while (provider, available) not in self.events:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(_wait(), BOUND)


@contextlib.asynccontextmanager
async def fallback_session(
    primary: tts.TTS, backup: tts.TTS, *, max_retry_per_tts: int = 0
) -> AsyncIterator[tuple[Harness, Availability]]:
    adapter = tts.FallbackAdapter([primary, backup], max_retry_per_tts=max_retry_per_tts)
    availability = Availability(adapter)
    try:
        async with agent_session(adapter, REPLIES, conn_options=CONN) as h:
            yield h, availability
    finally:
        await adapter.aclose()
        await primary.aclose()
        await backup.aclose()


async def _reply(h: Harness, user: str) -> None:
    handle = h.session.generate_reply(user_input=user)
    await asyncio.wait_for(handle.wait_for_playout(), BOUND)


def _norm(text: str) -> str:
    return " ".join(text.split())


def _check_spoken_once(h: Harness, rate: int, text: str) -> None:
    """The last segment played is ``text`` in full, each sentence once, and it reached the chat context."""
    seg = h.player.segments[-1]
    parts = sentences(text)
    assert not seg.interrupted
    assert seg.played == pytest.approx(sum(tone_duration(s) for s in parts), abs=0.05), "no audio repeated"
    got = sentence_frequencies(seg.pcm, rate, parts)
    assert got == pytest.approx([tone_frequency(s) for s in parts], rel=0.01)
    msg = h.assistant_messages()[-1]
    assert _norm(msg.text_content or "") == text and not msg.interrupted


async def _fail_over_and_recover(
    h: Harness, availability: Availability, emu: Emulator, *, recover: Callable[[], Awaitable[Any]]
) -> None:
    """Reply 1 fails on the primary and is spoken by Kitta; the primary recovers, reply 2 is Kitta's (the
    primary is still marked down) while LiveKit probes it; reply 3 is the primary's again."""
    rate = h.session.tts.sample_rate  # type: ignore[union-attr]
    await _reply(h, "one")
    _check_spoken_once(h, rate, FIRST)
    assert emu.stats.kitta_segment_texts == sentences(FIRST), "the backup spoke reply 1"
    assert ("Nineninesix", False) in availability.events
    await recover()
    await _reply(h, "two")
    _check_spoken_once(h, rate, SECOND)
    assert emu.stats.kitta_segment_texts == sentences(FIRST) + sentences(SECOND)
    await availability.wait_for("Nineninesix", True)  # LiveKit's probe of the primary succeeded
    kitta_before = list(emu.stats.kitta_segment_texts)
    await _reply(h, "three")
    _check_spoken_once(h, rate, THIRD)
    assert emu.stats.kitta_segment_texts == kitta_before, "reply 3 is the primary's"


FAULTS = {
    # 503 not_initialized: the server sends the error frame and closes the socket
    "socket-closing-error": lambda: Fault(action="error", error_code="not_initialized", times=0),
    # the TCP connection is cut, no close frame
    "dropped-socket": lambda: Fault(action="drop", times=0),
    # the context never gets audio; the socket stays open (our 1 s bound fails the turn)
    "no-audio": lambda: Fault(action="stall", times=0),
}


@pytest.mark.parametrize("failure", list(FAULTS))
async def test_primary_fails_before_audio_backup_speaks_then_primary_is_used_again(
    emu: Emulator, failure: str
) -> None:
    emu.add_fault(FAULTS[failure]())
    primary = make_provider_tts(emu, "nineninesix")
    backup = make_provider_tts(emu, "kitta")
    async with fallback_session(primary, backup) as (h, availability):

        async def recover() -> None:
            # LiveKit's probe after reply 1 ran against the broken primary: wait until it has failed
            await emu.wait_until(lambda: len(emu.stats.faults_fired) >= 2, timeout=BOUND)
            emu.clear_faults()

        await _fail_over_and_recover(h, availability, emu, recover=recover)
    assert emu.stats.contexts_done >= 2  # the successful probe and reply 3


async def test_unreachable_primary_backup_speaks_then_primary_is_used_again(
    emu: Emulator, make_emulator: Callable[..., Awaitable[Emulator]]
) -> None:
    down = await make_emulator()
    port = down.port
    await down.stop()  # nothing listens on the primary's address any more
    primary = nineninesix.TTS(down.api_key, base_url=f"http://127.0.0.1:{port}", voice=TONE_VOICE_ID)
    backup = make_provider_tts(emu, "kitta")
    restarted: list[Emulator] = []

    async def recover() -> None:
        restarted.append(await make_emulator(port=port))

    async with fallback_session(primary, backup) as (h, availability):
        await _fail_over_and_recover(h, availability, emu, recover=recover)
    assert restarted[0].stats.contexts_done >= 2  # the probe and reply 3 reached the restarted server


@pytest.mark.parametrize(
    ("code", "attempts"),
    [("not_initialized", 2), ("generation_failed", 2), ("voice_not_found", 1), ("insufficient_credits", 1)],
)
async def test_the_adapter_retries_only_what_our_errors_call_retryable(
    emu: Emulator, code: str, attempts: int
) -> None:
    """With one retry per TTS: a transient error (503, 500) is retried on the primary, a permanent one (404,
    402) goes straight to the backup. The backup speaks the reply either way. (LiveKit itself forces a 4xx
    status non-retryable; for a 5xx our ``retryable`` flag decides: forcing it False fails this test.)

    Attempts are counted on the server: the reply's own attempts, plus one by LiveKit's recovery probe
    (``max_retry=0``) once the reply is synthesized.
    """
    emu.add_fault(Fault(action="error", error_code=code, times=0))
    primary = make_provider_tts(emu, "nineninesix")
    backup = make_provider_tts(emu, "kitta")
    async with fallback_session(primary, backup, max_retry_per_tts=1) as (h, _):
        await _reply(h, "one")
        _check_spoken_once(h, h.session.tts.sample_rate, FIRST)  # type: ignore[union-attr]
        assert emu.stats.kitta_segment_texts == sentences(FIRST)
        await emu.wait_until(lambda: len(emu.stats.faults_fired) >= attempts + 1, timeout=BOUND)
    assert len(emu.stats.faults_fired) == attempts + 1


async def test_primary_failing_after_audio_is_not_replayed(emu: Emulator) -> None:
    """Audio of the reply was heard when the primary failed: neither a retry nor the backup repeats it."""
    emu.add_fault(Fault(trigger="Sure", action="error", error_code="generation_failed", after_chunks=20))
    primary = make_provider_tts(emu, "nineninesix")
    backup = make_provider_tts(emu, "kitta")
    async with fallback_session(primary, backup, max_retry_per_tts=2) as (h, _):
        handle = h.session.generate_reply(user_input="long")
        await asyncio.wait_for(handle.wait_for_playout(), BOUND)
        seg = h.player.segments[-1]
        sent = 20 * 0.04  # seconds of audio the server sent before the error
        # at most what was sent (nothing replayed); LiveKit drops the emitter's unfinished 200 ms frame when
        # a stream fails, so up to that much of it may be missing
        assert sent - 0.2 <= seg.played <= sent + 0.01, seg.played
        assert emu.stats.contexts_started == 1, "no retry of a turn the user already heard"
        assert emu.stats.kitta_segment_texts == [], "the backup did not repeat the reply"
        # the chat context keeps what was heard (the adapter ends the segment; LiveKit does not flag it)
        kept = _norm(h.assistant_messages()[-1].text_content or "")
        assert kept and LONG.startswith(kept) and kept != LONG
        assert abs(prefix_error(kept, sentences(LONG), seg.played).words) <= 1
