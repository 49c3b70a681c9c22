"""A real LiveKit ``AgentSession`` (no room) speaking through ``nineninesix.TTS`` and ``kitta.TTS``.

The session gets a scripted LLM, a sink that plays audio in real time and LiveKit's transcript synchronizer
(what the room output uses), so what reaches the chat context is what LiveKit decided was heard. Replies are
started with ``generate_reply`` / ``say`` and cut with ``session.interrupt()``, as an app does.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterator

import pytest
from livekit.agents import tts
from livekit.agents.metrics import TTSMetrics
from livekit.agents.metrics.usage import TTSModelUsage
from session_helpers import (
    BOUND,
    Harness,
    agent_session,
    make_provider_tts,
    sentences,
)

from heard import prefix_error, sentence_frequencies
from ttsbridge.emulator import Emulator, tone_duration, tone_frequency

PROVIDERS = ["nineninesix", "kitta"]

GREETING = "Hello! How can I help?"
LONG = "Sure, I can help with that. Your table for four is booked for eight tonight. Is there anything else?"
NEXT = "Of course. What else can I do?"
REPLIES = {"hi": GREETING, "book": LONG, "more": NEXT}
#: where the user barges in: 0.38 s into LONG's second sentence, inside "table"
BARGE_IN_AT = 2.0


@pytest.fixture
def paced(emu: Emulator) -> Iterator[Emulator]:
    """Both endpoints render at twice real time: a reply is still being generated while it plays."""
    emu.config.realtime_factor = 2.0
    emu.config.kitta.realtime_factor = 2.0
    yield emu


def _norm(text: str) -> str:
    return " ".join(text.split())


async def _reply(h: Harness, user: str) -> None:
    handle = h.session.generate_reply(user_input=user)
    await asyncio.wait_for(handle.wait_for_playout(), BOUND)


def _check_spoken(h: Harness, t: tts.TTS, text: str) -> None:
    """The last played segment is ``text``, each sentence once, in order, in full."""
    seg = h.player.segments[-1]
    parts = sentences(text)
    assert not seg.interrupted
    assert seg.played == pytest.approx(sum(tone_duration(s) for s in parts), abs=0.05)
    got = sentence_frequencies(seg.pcm, t.sample_rate, parts)
    assert got == pytest.approx([tone_frequency(s) for s in parts], rel=0.01)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_reply_is_spoken_and_its_transcript_reaches_the_chat_context(
    paced: Emulator, provider: str
) -> None:
    t = make_provider_tts(paced, provider)
    try:
        async with agent_session(t, REPLIES) as h:
            await _reply(h, "book")
            _check_spoken(h, t, LONG)
            [msg] = h.assistant_messages()
            assert _norm(msg.text_content or "") == LONG and not msg.interrupted
            assert _norm(h.text.segments[-1]) == LONG  # the synchronized transcript, word by word
    finally:
        await t.aclose()


@pytest.mark.parametrize("warm", [False, True], ids=["first-reply", "after-a-reply"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_barge_in_keeps_the_heard_prefix_and_cancels_on_the_server(
    paced: Emulator, provider: str, warm: bool
) -> None:
    emu = paced
    t = make_provider_tts(emu, provider)
    try:
        async with agent_session(t, REPLIES) as h:
            if warm:  # the greeting completes: word timing has measured the voice's rate
                await _reply(h, "hi")
            handle = h.session.generate_reply(user_input="book")
            seg = await h.player.wait_played(BARGE_IN_AT)
            await asyncio.wait_for(h.session.interrupt(), BOUND)
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            assert handle.interrupted and seg.interrupted
            msg = h.assistant_messages()[-1]
            kept = msg.text_content or ""
            assert msg.interrupted and LONG.startswith(_norm(kept)) and _norm(kept) != LONG
            err = prefix_error(kept, sentences(LONG), seg.played)
            print(f"\nheard-prefix error ({provider}, {'warm' if warm else 'cold'}): {err}")
            assert abs(err.words) <= 1, err
            played_at_cut = seg.played

            await _reply(h, "more")  # the next reply speaks, from its first word
            _check_spoken(h, t, NEXT)
            assert seg.played == played_at_cut, "no audio of the cut reply after the barge-in"
            # what the LLM saw for the next reply: the heard prefix, not the whole of LONG
            seen = [m for m in h.llm.requests[-1].messages() if m.role == "assistant"]
            assert _norm(seen[-1].text_content or "") == _norm(kept)
    finally:
        await t.aclose()
    if provider == "nineninesix":
        _check_cancelled_on_the_same_socket(emu, warm)
    else:
        _check_kitta_session_closed(emu, warm)


def _check_cancelled_on_the_same_socket(emu: Emulator, warm: bool) -> None:
    """One socket for every reply; the cut reply's context was cancelled on it, and only that one."""
    assert emu.stats.ws_connections == 1
    msgs = emu.stats.messages_of(1)
    contexts = list(dict.fromkeys(m["context_id"] for m in msgs if m.get("transcript", "").strip()))
    assert len(contexts) == (3 if warm else 2)
    cut = contexts[-2]
    assert [m for m in msgs if m.get("cancel")] == [{"context_id": cut, "cancel": True}]
    assert emu.stats.cancels == 1 and emu.stats.contexts_cancelled == 1
    assert emu.stats.contexts_done == len(contexts) - 1


def _check_kitta_session_closed(emu: Emulator, warm: bool) -> None:
    """Kitta v2 carries one generation per session: the cut reply's session was closed by the client (its
    unplayed rest never finished), and the next reply ran on another session."""
    completed = 2 if warm else 1
    assert emu.stats.kitta_finished == completed
    assert emu.stats.kitta_client_closes >= 1
    assert emu.stats.kitta_segment_texts[-len(sentences(NEXT)) :] == sentences(NEXT)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_say_speaks_through_the_tts(paced: Emulator, provider: str) -> None:
    t = make_provider_tts(paced, provider)
    try:
        async with agent_session(t, REPLIES) as h:
            handle = h.session.say(NEXT)
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            _check_spoken(h, t, NEXT)
            [msg] = h.assistant_messages()
            assert _norm(msg.text_content or "") == NEXT
    finally:
        await t.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_update_options_between_replies_takes_effect(paced: Emulator, provider: str) -> None:
    emu = paced
    clone = emu.voices.clone(name="second voice", clip=b"not a wav: a fixed tone from the bytes")
    t = make_provider_tts(emu, provider)
    try:
        async with agent_session(t, REPLIES) as h:
            await _reply(h, "hi")
            _check_spoken(h, t, GREETING)
            t.update_options(voice=clone.id)  # type: ignore[attr-defined]
            await _reply(h, "more")
            seg = h.player.segments[-1]
            got = sentence_frequencies(seg.pcm, t.sample_rate, sentences(NEXT))
            assert got == pytest.approx([clone.frequency] * len(got), rel=0.01)
            assert _norm(h.assistant_messages()[-1].text_content or "") == NEXT
    finally:
        await t.aclose()


@pytest.mark.parametrize(
    ("provider", "marker"),
    [
        ("nineninesix", "[[error:generation_failed:20]]"),
        ("nineninesix", "[[drop:20]]"),
        ("kitta", "[[kitta:error_after_audio]]"),  # in its second sentence: after its first frame
    ],
    ids=["nineninesix-error", "nineninesix-drop", "kitta-error"],
)
async def test_a_reply_failing_after_audio_plays_all_the_audio_received(
    paced: Emulator, provider: str, marker: str
) -> None:
    # LiveKit's emitter holds the frame it is assembling (up to 200 ms) and drops it with the emitter when
    # the stream raises: 0.8 s received, 0.66 s played. The plugin ends the emitter's input and waits for it
    # before raising, so the user hears all the audio the server sent.
    emu = paced
    t = make_provider_tts(emu, provider)
    if provider == "kitta":
        reply = f"Sure, I can help with that. Your table {marker} for four is booked for eight tonight."
    else:
        reply = f"Sure, I can help {marker} with that. Your table for four is booked for eight tonight."
    try:
        async with agent_session(t, {"go": reply}) as h:
            handle = h.session.generate_reply(user_input="go")
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            seg = h.player.segments[-1]
    finally:
        await t.aclose()
    if provider == "nineninesix":
        received = emu.stats.chunks_sent * emu.config.chunk_ms / 1000  # 20 chunks: 0.8 s
        assert received == pytest.approx(0.8)
    else:  # the first sentence whole, then the frames of the second before the error
        first, chunk = tone_duration("Sure, I can help with that."), emu.config.kitta.chunk_ms / 1000
        received = first + (emu.stats.kitta_audio_frames - math.ceil(first / chunk - 1e-9)) * chunk
        assert received > first
    # (+10 ms: LiveKit ends a segment whose audio its flush timer already sent with a 10 ms silent marker)
    assert received - 0.002 <= seg.played <= received + 0.012, (seg.played, received)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_barged_in_reply_reaches_the_sessions_metrics_as_cancelled_with_its_bill(
    paced: Emulator, provider: str
) -> None:
    # LiveKit emits no TTSMetrics for an interrupted reply (nor does its Cartesia plugin): the characters
    # billed for it would reach no metrics_collected listener nor LiveKit's usage collector.
    emu = paced
    t = make_provider_tts(emu, provider)
    collected: list[TTSMetrics] = []
    t.on("metrics_collected", collected.append)
    try:
        async with agent_session(t, REPLIES) as h:
            handle = h.session.generate_reply(user_input="book")
            await h.player.wait_played(BARGE_IN_AT)
            await asyncio.wait_for(h.session.interrupt(), BOUND)
            await asyncio.wait_for(handle.wait_for_playout(), BOUND)
            await asyncio.wait_for(h.session.aclose(), BOUND)  # the cut stream is closed by now
            [usage] = [u for u in h.session.usage.model_usage if isinstance(u, TTSModelUsage)]
    finally:
        await t.aclose()
    [metrics] = collected
    assert metrics.cancelled is True and metrics.audio_duration > BARGE_IN_AT
    if provider == "kitta":  # the segments whose audio arrived
        billed = emu.stats.kitta_units_committed
    else:  # all text sent for the context
        billed = emu.stats.credits_charged - emu.stats.credits_refunded
    assert metrics.characters_count == billed > 0
    # LiveKit's usage collector (session.usage, session_usage_updated) counted the bill
    assert usage.characters_count == billed and usage.audio_duration == metrics.audio_duration
