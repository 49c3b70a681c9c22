"""A full Pipecat phone bot, run by ``PipelineWorker`` under a ``WorkerRunner``: Twilio WebSocket transport in ->
STT stand-in -> user aggregator -> scripted LLM -> our TTS -> Twilio transport out -> assistant aggregator.

A caller plays Twilio over loopback (real-time playback, ``clear`` honoured). It asks for a long reply and
barges in mid-sentence: the LLM context keeps only the heard prefix, the caller gets ``clear`` and no stale
media, the server context is cancelled (Nineninesix: on the same socket), and the next reply is spoken whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from call_helpers import RATE, Caller, assistant_texts, make_phone_tts, phone_bot

from heard import prefix_error, sentence_frequencies
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency

LONG = "Sure, I can help with that. Your table for four is booked for eight tonight. Is there anything else?"
NEXT = "Of course. What else can I do?"
REPLIES = {"book a table": LONG, "wait": NEXT}
KEYS = {"1": "book a table", "2": "wait"}
#: the caller barges in 2.0 s into LONG: 0.38 s into its second sentence, inside "table"
BARGE_IN_AT = 2.0


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def paced(emu: Emulator) -> Iterator[Emulator]:
    """Both endpoints render at twice real time: the reply is still being generated when the caller cuts in."""
    emu.config.realtime_factor = 2.0
    emu.config.kitta.realtime_factor = 2.0
    yield emu


@pytest.mark.parametrize("provider", ["nineninesix", "kitta"])
async def test_barge_in_keeps_the_heard_prefix_and_the_caller_gets_clear_and_no_stale_media(
    paced: Emulator, provider: str
) -> None:
    emu = paced
    async with phone_bot(make_phone_tts(emu, provider), REPLIES, KEYS) as bot:
        async with Caller.dial(bot.url) as caller:
            await caller.say("1")
            await caller.wait_played(BARGE_IN_AT)
            await caller.press("2")  # the caller starts talking: the user aggregator interrupts the bot
            await caller.wait_until(lambda: len(caller.stretches) == 2)  # Twilio got `clear`
            await caller.press("#")  # ... and stops talking: the final transcript ends the user turn
            cut = caller.stretches[0]
            next_len = sum(tone_duration(s) for s in _sentences(NEXT))
            await caller.wait_until(lambda: caller.current.received >= next_len - 0.02)
            await caller.wait_until(lambda: len(bot.llm.seen) == 2)
    # one `clear` per user turn (the first one, before the bot spoke, had nothing to drop)
    assert caller.events.count("clear") == 2 and len(caller.stretches) == 2
    heard_at = cut.played_at_clear
    assert heard_at is not None and 1.9 <= heard_at <= cut.received

    # the LLM context: only the heard prefix of LONG (what the LLM saw for the next reply, and at the end)
    kept = assistant_texts(bot.llm.seen[1])[-1]
    assert LONG.startswith(_norm(kept)) and _norm(kept) != LONG
    err = prefix_error(kept, _sentences(LONG), heard_at)
    print(f"\nheard-prefix error (pipecat, {provider}): {err}")
    assert abs(err.words) <= 1, err
    assert _norm(assistant_texts(list(bot.context.get_messages()))[-1]) == NEXT

    # no stale media: after `clear` the caller got NEXT, whole, and nothing of LONG
    after = caller.stretches[1]
    parts = _sentences(NEXT)
    assert after.received == pytest.approx(next_len, abs=0.05)
    got = sentence_frequencies(after.pcm, RATE, parts)
    assert got == pytest.approx([tone_frequency(s) for s in parts], rel=0.02)
    _check_server_side(emu, provider)


def _check_server_side(emu: Emulator, provider: str) -> None:
    if provider == "kitta":  # one generation per session: the cut one was closed, not finished
        assert emu.stats.kitta_finished == 1 and emu.stats.kitta_client_closes >= 1
        return
    assert emu.stats.ws_connections == 1, "both replies on one socket"
    msgs: list[dict[str, Any]] = emu.stats.messages_of(1)
    contexts = list(dict.fromkeys(m["context_id"] for m in msgs if m.get("transcript", "").strip()))
    assert len(contexts) == 2
    assert [m for m in msgs if m.get("cancel")] == [{"context_id": contexts[0], "cancel": True}]
    assert emu.stats.contexts_cancelled == 1 and emu.stats.contexts_done == 1
    sent = [m["transcript"].strip() for m in msgs if m["context_id"] == contexts[0] and m.get("transcript")]
    assert [s for s in sent if s] == _sentences(LONG)
