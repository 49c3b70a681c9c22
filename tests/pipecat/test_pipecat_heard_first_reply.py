"""Heard text on the first reply of a Pipecat phone bot (before the voice's speaking rate is learned).

The caller barges in about 1 s into the bot's first reply: the LLM context keeps the words that were played,
within one word, for a fast (~17 characters/s) and a slow (~11 characters/s) voice, on both providers.
(The LiveKit side, with LiveKit's own estimate beside it: ``tests/livekit/test_livekit_heard_first_reply.py``.)
"""

from __future__ import annotations

import re

import pytest
from call_helpers import Caller, assistant_texts, make_phone_tts, phone_bot

from heard import PrefixError, prefix_error, tone_voice
from ttsbridge.emulator import Emulator

#: ms of audio per character (tone: 60, ~16.7 characters/s; 90: ~11)
VOICES = {"fast": 60.0, "slow": 90.0}
REPLY = "Sure, I can help you. This is a test of the new booking system we built for everyone who calls."
#: about 1 s in, inside a word for both voices (a cut right at a word's end makes the count a coin toss)
CUT_AT = 1.1


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


async def _cut_first_reply(emu: Emulator, provider: str, ms: float, cut_at: float) -> PrefixError:
    emu.config.realtime_factor = emu.config.kitta.realtime_factor = 2.0  # generating while it plays
    async with phone_bot(
        make_phone_tts(emu, provider, tone_voice(emu, ms)),
        {"go": REPLY, "wait": "Okay."},
        {"1": "go", "2": "wait"},
    ) as bot:
        async with Caller.dial(bot.url) as caller:
            await caller.say("1")
            await caller.wait_played(cut_at)
            await caller.press("2")  # the caller talks: the bot is interrupted
            await caller.wait_until(lambda: len(caller.stretches) == 2)  # Twilio got `clear`
            await caller.press("#")
            await caller.wait_until(lambda: len(bot.llm.seen) == 2)
    heard_at = caller.stretches[0].played_at_clear
    assert heard_at is not None
    kept = assistant_texts(bot.llm.seen[1])[-1]
    assert REPLY.startswith(" ".join(kept.split()))
    return prefix_error(kept, _sentences(REPLY), heard_at, ms_per_char=ms)


@pytest.mark.parametrize("voice", list(VOICES))
@pytest.mark.parametrize("provider", ["nineninesix", "kitta"])
async def test_the_first_reply_keeps_what_was_played(emu: Emulator, provider: str, voice: str) -> None:
    err = await _cut_first_reply(emu, provider, VOICES[voice], CUT_AT)
    print(f"\nheard-prefix error (pipecat, {provider}, {voice}, first reply): {err}")
    assert abs(err.words) <= 1, err


@pytest.mark.parametrize("voice", list(VOICES))
async def test_kitta_times_the_second_sentence_from_the_first_ones_end(emu: Emulator, voice: str) -> None:
    # cut 0.25 s into the second sentence: the first segment's `usage` gave its real length (the prior
    # alone would be a word or two off by now)
    ms = VOICES[voice]
    err = await _cut_first_reply(emu, "kitta", ms, len(_sentences(REPLY)[0]) * ms / 1000 + 0.25)
    print(f"\nheard-prefix error (pipecat, kitta, {voice}, second sentence): {err}")
    assert abs(err.words) <= 1, err
