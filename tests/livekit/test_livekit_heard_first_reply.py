"""Heard text on the first reply of a LiveKit ``AgentSession`` (before the voice's speaking rate is learned).

A reply cut about 1 s in must keep, in the chat history, the words that were played: within one word, for a
fast (~17 characters/s) and a slow (~11 characters/s) voice, on both providers, and no worse than LiveKit's
own estimate (its transcript synchronizer without our aligned words) in the same run. Kitta reports the
end of each segment (``usage``): a cut in the second sentence is timed from the first one's real length.
(The Pipecat side: ``tests/pipecat/test_pipecat_heard_first_reply.py``.)
"""

from __future__ import annotations

import asyncio

import pytest
from session_helpers import BOUND, agent_session, make_provider_tts, sentences

from heard import PrefixError, prefix_error, tone_voice
from ttsbridge.emulator import Emulator

PROVIDERS = ["nineninesix", "kitta"]
#: the voices: ms of audio per character (tone: 60, ~16.7 characters/s; 90: ~11)
VOICES = {"fast": 60.0, "slow": 90.0}
REPLY = "Sure, I can help you. This is a test of the new booking system we built for everyone who calls."
#: about 1 s in, inside a word for both voices (a cut right at a word's end makes the count a coin toss)
CUT_AT = 1.1


async def cut_first_reply(
    emu: Emulator, provider: str, ms_per_char: float, cut_at: float, *, aligned: bool
) -> PrefixError:
    """A fresh TTS (nothing learned) and session; the reply is cut ``cut_at`` s into its playback. The
    error of the heard prefix kept in the chat history; ``aligned=False``: LiveKit's own estimate."""
    t = make_provider_tts(emu, provider, voice=tone_voice(emu, ms_per_char))
    try:
        async with agent_session(t, {"go": REPLY}, use_tts_aligned_transcript=aligned) as h:
            handle = h.session.generate_reply(user_input="go")
            seg = await h.player.wait_played(cut_at)
            await asyncio.wait_for(h.session.interrupt(), BOUND)
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            kept = h.assistant_messages()[-1].text_content or ""
    finally:
        await t.aclose()
    assert REPLY.startswith(" ".join(kept.split()))
    return prefix_error(kept, sentences(REPLY), seg.played, ms_per_char=ms_per_char)


@pytest.fixture
def paced(emu: Emulator) -> Emulator:
    emu.config.realtime_factor = emu.config.kitta.realtime_factor = 2.0  # generating while it plays
    return emu


@pytest.mark.parametrize("voice", list(VOICES))
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_first_reply_keeps_what_was_played(paced: Emulator, provider: str, voice: str) -> None:
    ours = await cut_first_reply(paced, provider, VOICES[voice], CUT_AT, aligned=True)
    livekit = await cut_first_reply(paced, provider, VOICES[voice], CUT_AT, aligned=False)
    print(f"\n{provider}, {voice}: ours {ours}\n{provider}, {voice}: LiveKit's {livekit}")
    assert abs(ours.words) <= 1, ours
    assert abs(ours.words) <= abs(livekit.words), (ours, livekit)


@pytest.mark.parametrize(
    "voice",
    [
        pytest.param(
            "fast",
            marks=pytest.mark.xfail(
                reason="before the first sentence's usage its words run on the prior (15 chars/s, the voice "
                "~17): LiveKit's synchronizer, which waits whole syllables per word, then keeps 2 words too few "
                "on 1.8.9 (1.8.0: within one); with the true times it keeps the right prefix at this cut on "
                "both, but not at every cut (docs/livekit.md, bench/livekit_synchronizer_sweep.py)",
                strict=False,
            ),
        ),
        "slow",
    ],
)
async def test_kitta_times_the_second_sentence_from_the_first_ones_end(paced: Emulator, voice: str) -> None:
    # cut in the second sentence (0.25 s past the end of the first one's audio): the first segment's `usage`
    # gave its real length, so the rest is timed at the voice's real rate, not at the prior
    ms = VOICES[voice]
    cut = len(sentences(REPLY)[0]) * ms / 1000 + 0.25
    ours = await cut_first_reply(paced, "kitta", ms, cut, aligned=True)
    livekit = await cut_first_reply(paced, "kitta", ms, cut, aligned=False)
    print(f"\nkitta, {voice}, cut at {cut:.2f} s: ours {ours}\nkitta, {voice}: LiveKit's {livekit}")
    assert abs(ours.words) <= 1, ours
    assert abs(ours.words) <= abs(livekit.words), (ours, livekit)
