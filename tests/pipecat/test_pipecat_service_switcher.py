"""``ServiceSwitcher([NineninesixTTSService, KittaTTSService], ServiceSwitcherStrategyFailover)`` in the full
phone bot: a permanent error on the primary (a voice the server does not have, a key it refuses) makes the
primary unusable, the switcher fails over, and the caller's next turn is spoken by the backup. The failed
turn's text, never heard, stays out of the LLM context.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from call_helpers import BOUND, RATE, Caller, assistant_texts, phone_bot
from pipecat.pipeline.service_switcher import ServiceSwitcher, ServiceSwitcherStrategyFailover

from heard import sentence_frequencies
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, tone_duration, tone_frequency
from ttsbridge.pipecat import KittaTTSService, NineninesixTTSService

FIRST = "Hello! How can I help?"
SECOND = "Of course. What else can I do?"
REPLIES = {"hello": FIRST, "help me": SECOND}
KEYS = {"1": "hello", "2": "help me"}


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def _primary(emu: Emulator, failure: str) -> NineninesixTTSService:
    voice = "no-such-voice" if failure == "bad-voice" else TONE_VOICE_ID
    key = "sk_996_revoked_key" if failure == "bad-key" else emu.api_key
    if failure == "bad-key":
        emu.config.api_keys = {emu.api_key}  # only the emulator's own key is valid now
    return NineninesixTTSService(
        key,
        base_url=emu.base_url,
        encoding="pcm_mulaw",
        settings=NineninesixTTSService.Settings(voice=voice),
    )


def _backup(emu: Emulator) -> KittaTTSService:
    return KittaTTSService(
        emu.config.kitta.a_valid_key(),
        base_url=emu.base_url,
        settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
        provider_options={"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0},
    )


async def _run_switcher(emu: Emulator, failure: str) -> tuple[Any, Any, list[Any], asyncio.Event, Any]:
    primary, backup = _primary(emu, failure), _backup(emu)
    switcher = ServiceSwitcher([primary, backup], strategy_type=ServiceSwitcherStrategyFailover)
    switched: list[Any] = []
    failed_over = asyncio.Event()

    @switcher.strategy.event_handler("on_service_switched")
    async def _switched(_strategy: Any, service: Any) -> None:
        switched.append(service)
        failed_over.set()

    return primary, backup, switched, failed_over, switcher


async def test_bad_voice_fails_over_and_the_next_turn_is_spoken_by_the_backup(emu: Emulator) -> None:
    """The voice is checked on the first request: turn 1 fails on the primary, turn 2 is the backup's."""
    primary, backup, switched, failed_over, switcher = await _run_switcher(emu, "bad-voice")
    async with phone_bot(switcher, REPLIES, KEYS) as bot:
        async with Caller.dial(bot.url) as caller:
            await caller.say("1")  # the primary fails on this turn
            await asyncio.wait_for(failed_over.wait(), BOUND)
            assert switched == [backup] and not primary.is_usable and backup.is_usable
            first_heard = caller.current.received
            await caller.say("2")
            parts = _sentences(SECOND)
            total = sum(tone_duration(s) for s in parts)
            await caller.wait_until(lambda: caller.current.received >= first_heard + total - 0.02)
            await caller.wait_until(lambda: len(bot.llm.seen) == 2)
    assert first_heard == 0.0, "the failed turn was not spoken (nor replayed)"
    _check_heard(caller.current, parts, total)
    assert emu.stats.kitta_segment_texts == parts, "the backup spoke the next turn"
    assert emu.stats.contexts_done == 0, "the primary spoke nothing"
    # the failed turn's text was never heard: it is not in what the LLM saw for the next turn
    assert FIRST not in " ".join(assistant_texts(bot.llm.seen[1]))


async def test_bad_key_fails_over_at_connect_and_the_first_turn_is_spoken_by_the_backup(
    emu: Emulator,
) -> None:
    """A refused key is known when the service connects (its prewarm's handshake gets 401): the switcher fails
    over before any turn, so the caller's first turn is already the backup's, and the primary speaks nothing."""
    primary, backup, switched, failed_over, switcher = await _run_switcher(emu, "bad-key")
    async with phone_bot(switcher, REPLIES, KEYS) as bot:
        async with Caller.dial(bot.url) as caller:
            await asyncio.wait_for(failed_over.wait(), BOUND)
            assert switched == [backup] and not primary.is_usable and backup.is_usable
            await caller.say("1")
            parts = _sentences(FIRST)
            total = sum(tone_duration(s) for s in parts)
            await caller.wait_until(lambda: caller.current.received >= total - 0.02)
            await caller.wait_until(lambda: len(bot.llm.seen) == 1)
    _check_heard(caller.current, parts, total)
    assert emu.stats.kitta_segment_texts == parts, "the backup spoke the first turn"
    assert emu.stats.contexts_done == 0, "the primary spoke nothing"


def _check_heard(heard: Any, parts: list[str], total: float) -> None:
    assert heard.received == pytest.approx(total, abs=0.05)
    got = sentence_frequencies(heard.pcm, RATE, parts)
    assert got == pytest.approx([tone_frequency(s) for s in parts], rel=0.02)
