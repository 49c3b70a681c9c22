"""The spoken form through the LiveKit plugins, both providers (docs/text.md): the provider gets the spoken
form, while the aligned transcript (word timing) and the chat history keep the LLM's own words.

Properties: random replies from every class (tests/replies.py), pushed as random LLM tokens into
``tts.stream()``, cut once a random amount of audio came: the aligned words whose audio had played are a
prefix of the LLM's text ending on a word boundary, never inside a rewritten span, whose last rewritten span
had all been played (the tone voice: 60 ms per character of each transcript). And through an
``AgentSession`` (its transcript synchronizer, a real-time player, a barge-in at a random moment): the
assistant message in the chat history is a prefix of the LLM's own words (how LiveKit's synchronizer paces
them within a rewritten span is its own: docs/text.md). The Pipecat bugs of issue 31 as regressions on this
side too.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from livekit.agents.types import TimedString
from lk_helpers import BOUND, FAST, pcm_of, run_stream, run_synthesize, timed_words
from session_helpers import agent_session, make_provider_tts

from replies import ADAPTER_PROPERTY, check_kept, normalizer, replies, sent_transcripts, tokens
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.text import TextNormalizer

RATE = 24000


def plugin(emu: Emulator, provider: str, **kw: Any) -> Any:
    kw.setdefault("normalize_text", normalizer())
    return make_provider_tts(emu, provider, **kw)


async def _cut_stream(provider: str, toks: list[str], cut_s: float) -> None:
    text = "".join(toks)
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
        t = plugin(emu, provider)
        words: list[TimedString] = []
        got = 0.0
        try:
            async with t.stream(conn_options=FAST) as stream:
                for tok in toks:
                    stream.push_text(tok)
                stream.end_input()

                async def read() -> None:
                    nonlocal got
                    async for ev in stream:
                        words.extend(timed_words([ev]))
                        got += ev.frame.duration
                        if got >= cut_s:
                            return  # the barge-in: the stream is closed with the turn still going

                await asyncio.wait_for(read(), BOUND)
        finally:
            await t.aclose()
        heard = "".join(w for w in words if w.end_time <= got + 1e-6)  # what had played at the cut
        check_kept(heard, text, got, sent_transcripts(emu), t.text_normalizer)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], float]:
    text = draw(replies(min_items=4, max_items=10))
    return draw(tokens(text)), draw(st.floats(0.2, 4.0))


@ADAPTER_PROPERTY
@given(case=cases())
def test_nineninesix_aligned_words_are_the_llms_at_any_cut(case: tuple[list[str], float]) -> None:
    asyncio.run(_cut_stream("nineninesix", *case))


@ADAPTER_PROPERTY
@given(case=cases())
def test_kitta_aligned_words_are_the_llms_at_any_cut(case: tuple[list[str], float]) -> None:
    asyncio.run(_cut_stream("kitta", *case))


# -- the chat history of an AgentSession after a barge-in


async def _session_barge_in(provider: str, text: str, cut_s: float) -> None:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
        emu.config.realtime_factor = emu.config.kitta.realtime_factor = 2.0  # generating while it plays
        t = plugin(emu, provider)
        try:
            # tts_text_transforms=None: LiveKit's own markdown/emoji filters would run before the TTS sees the
            # LLM's text, and the aligned transcript would then hold the filtered text (docs/text.md)
            async with agent_session(t, {"go": text}, tts_text_transforms=None) as h:
                handle = h.session.generate_reply(user_input="go")
                await h.player.wait_until(
                    lambda: (
                        bool(h.player.segments)
                        and (h.player.segments[-1].played >= cut_s or h.player.segments[-1].finished)
                    )
                )
                seg = h.player.segments[-1]
                await asyncio.wait_for(h.session.interrupt(), BOUND)
                await asyncio.wait_for(handle.wait_for_playout(), BOUND)
                messages = h.assistant_messages()
                kept = (messages[-1].text_content or "") if messages else ""
        finally:
            await t.aclose()
        # LiveKit's synchronizer decides the history from our aligned words: the LLM's own words, a prefix in
        # order; it re-splits a multi-word span into words and paces each by its syllables, so the history
        # may end inside one, or hold a short rewritten word a little before its spoken form ended
        # (docs/text.md, "LiveKit"): the unit checks are on the aligned transcript (above), which we control.
        words = text.split()
        assert kept.split() == words[: len(kept.split())], (kept, text)
        assert seg.played > 0 or not kept  # nothing played, nothing kept


SESSION = settings(ADAPTER_PROPERTY, max_examples=int(os.environ.get("TTSBRIDGE_TEXT_EXAMPLES", 2)))


@st.composite
def session_cases(draw: st.DrawFn) -> tuple[str, float]:
    return draw(replies(min_items=4, max_items=8)), draw(st.floats(0.3, 2.5))


@SESSION
@given(case=session_cases(), provider=st.sampled_from(["nineninesix", "kitta"]))
def test_the_chat_history_keeps_the_llms_words_after_a_barge_in(
    case: tuple[str, float], provider: str
) -> None:
    asyncio.run(_session_barge_in(provider, *case))


# -- regressions (the Pipecat bugs of issue 31, on this side)


async def test_the_aligned_transcript_is_the_llms_text_and_the_provider_gets_the_spoken_form(
    emulator: Emulator,
) -> None:
    text = "**Note:** Nineninesix charges $1,234.50 for “API” calls. Call +1 (415) 555-0134!"
    t = plugin(emulator, "nineninesix")
    try:
        events = await run_stream(t, text)
    finally:
        await t.aclose()
    words = timed_words(events)
    assert "".join(words).strip() == text  # every word, the LLM's, in order (markup, curly quotes, digits)
    assert "+1 (415) 555-0134! " in words  # a rewritten span is one timed unit
    spoken = " ".join(sent_transcripts(emulator))
    assert "one thousand two hundred thirty-four dollars and fifty cents" in spoken
    assert "nine nine six" in spoken and '"A P I"' in spoken and "*" not in spoken and "“" not in spoken
    ends = [w.end_time for w in words]
    assert ends == sorted(ends) and ends[-1] <= sum(e.frame.duration for e in events) + 1e-6


async def test_synthesize_reads_the_spoken_form_and_times_the_llms_words(emulator: Emulator) -> None:
    text = "It is 5 km."
    t = plugin(emulator, "nineninesix")
    try:
        events = await run_synthesize(t, text)
    finally:
        await t.aclose()
    assert [w.strip() for w in timed_words(events)] == ["It", "is", "5 km."]  # "5 km." one unit
    assert pcm_of(events)
    assert emulator.stats.credits_charged == len("It is five kilometers.")


async def test_off_with_one_option(emulator: Emulator) -> None:
    t = plugin(emulator, "nineninesix", normalize_text=False)
    try:
        await run_stream(t, "It costs $5 today.")
    finally:
        await t.aclose()
    assert "$5" in " ".join(sent_transcripts(emulator))


async def test_the_turn_usage_shows_written_and_spoken_characters(emulator: Emulator) -> None:
    text = "It costs $5 today."
    t = plugin(emulator, "kitta")
    usages: list[Any] = []
    t.on("turn_usage", usages.append)
    try:
        await run_stream(t, text, by_word=False)
    finally:
        await t.aclose()
    [usage] = usages
    assert usage.characters_written == len(text) + 1  # (the plugin sends each sentence with a space after it)
    assert usage.characters_billed == len("It costs five dollars today.")
    assert usage.characters_heard == len(text) + 1  # the LLM's characters, all of them played


async def test_the_phrase_cache_keys_on_the_spoken_form(emulator: Emulator) -> None:
    from ttsbridge.cache import PhraseCache
    from ttsbridge.text import Lexicon

    cache = PhraseCache.memory(max_bytes=8 << 20)
    lexicon = Lexicon()
    t = plugin(emulator, "nineninesix", phrase_cache=cache, normalize_text=TextNormalizer(lexicon=lexicon))
    try:
        await asyncio.wait_for(cache.warm(t, ["Welcome to Acme, press 1."]), BOUND)
        assert t.known_phrase_segments("Welcome to Acme, press 1.") == ["Welcome to Acme, press one. "]
        lexicon.add("Acme", "ack me")  # another spoken form: another key
        assert t.known_phrase_segments("Welcome to Acme, press 1.") == ["Welcome to ack me, press one. "]
        report = await asyncio.wait_for(cache.warm(t, ["Welcome to Acme, press 1."]), BOUND)
        assert report.stored == 1
    finally:
        await t.aclose()
