"""Barge-in: cancel on the same socket, no stale audio, and an LLM context that holds only what was heard."""

from __future__ import annotations

import pytest
from pc_helpers import (
    S1,
    S2,
    S3,
    Gate,
    InterruptWhen,
    Probe,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    segment,
    tone_len,
)
from pipecat.frames.frames import (
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.emulator import Emulator, tone_frequency

AFTER = "Sure, go ahead."
#: Pace the emulator (twice real time) so a turn is still streaming when the interruption lands.
PACING = 2.0


def llm_turn(*sentences: str) -> list:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 5]) for i in range(0, len(text), 5)],
        LLMFullResponseEndFrame(),
    ]


def assistant_messages(context: LLMContext) -> list[str]:
    return [str(m.get("content")) for m in context.messages if m.get("role") == "assistant"]


async def test_interruption_cancels_on_the_same_socket_and_drops_stale_audio(emu: Emulator) -> None:
    emu.config.realtime_factor = PACING
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [*llm_turn(S1, S2, S3), InterruptWhen(probe.first_audio), *llm_turn(AFTER)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=24000)

    assert gate.fired.is_set()
    assert not errors_of(up)
    seen = probe.frames
    cut = next(i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame))
    contexts = list(dict.fromkeys(f.context_id for f in seen if isinstance(f, TTSAudioRawFrame)))
    assert len(contexts) == 2
    first, second = contexts
    # nothing of the cancelled context after the interruption: no audio, no words, no stop frame
    after = seen[cut + 1 :]
    assert not [f for f in after if isinstance(f, (TTSAudioRawFrame, TTSTextFrame)) and f.context_id == first]
    assert not [f for f in seen if isinstance(f, TTSStoppedFrame) and f.context_id == first]
    # it was cut in its first sentence
    heard = audio_of(seen[:cut], first)
    assert 0 < len(heard) / 2 / 24000 < tone_len(S1)
    # the server was told: one cancel, for that turn's context, acknowledged on the same socket
    server_contexts = list(dict.fromkeys(m["context_id"] for _, m in emu.stats.messages if "context_id" in m))
    cancels = [m for _, m in emu.stats.messages if m.get("cancel")]
    assert [c["context_id"] for c in cancels] == [server_contexts[0]]
    await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, timeout=5.0)
    assert emu.stats.ws_connections == 1
    # the next turn plays in full, on a fresh server context, with only its own audio
    assert len(server_contexts) == 2
    pcm = audio_of(after, second)
    assert len(pcm) / 2 / 24000 == pytest.approx(tone_len(AFTER), abs=0.02)
    mid = segment(pcm, 24000, 0.25 * tone_len(AFTER), 0.5 * tone_len(AFTER))
    assert dominant_frequency(mid, 24000) == pytest.approx(tone_frequency(AFTER), abs=15)
    assert [f for f in after if isinstance(f, TTSStoppedFrame) and f.context_id == second]


async def test_interrupted_speak_frame_is_cancelled_too(emu: Emulator) -> None:
    emu.config.realtime_factor = PACING
    tts = make_tts(emu)
    gate, probe = Gate(), Probe()
    frames = [TTSSpeakFrame(S2), InterruptWhen(probe.first_audio), TTSSpeakFrame(AFTER)]
    _, up = await run(pipeline(gate, tts, probe), frames, rate=16000)

    assert not errors_of(up)
    await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, timeout=5.0)
    assert emu.stats.cancels == 1
    assert emu.stats.ws_connections == 1
    contexts = list(dict.fromkeys(f.context_id for f in probe.frames if isinstance(f, TTSAudioRawFrame)))
    assert len(contexts) == 2
    pcm = audio_of(probe.frames, contexts[1])
    assert len(pcm) / 2 / 16000 == pytest.approx(tone_len(AFTER), abs=0.02)


async def test_interrupted_turn_leaves_only_what_was_heard_in_the_llm_context(emu: Emulator) -> None:
    """Interrupted in sentence 1 of 3: the assistant message holds the start of sentence 1 only."""
    emu.config.realtime_factor = PACING
    tts = make_tts(emu)
    context = LLMContext()
    gate, probe = Gate(), Probe(words=2)
    frames = [*llm_turn(S1, S2, S3), InterruptWhen(probe.words_seen)]
    await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=24000)

    assert gate.fired.is_set()
    messages = assistant_messages(context)
    assert len(messages) == 1
    said = messages[0].split()
    assert said, "the words heard before the interruption reach the context"
    assert said == S1.split()[: len(said)]
    assert len(said) < len(S1.split())
    for word in {*S2.split(), *S3.split()} - set(S1.split()):
        assert word not in said


async def test_uninterrupted_turn_puts_every_word_in_the_llm_context(emu: Emulator) -> None:
    tts = make_tts(emu)
    context = LLMContext()
    await run(pipeline(tts, LLMAssistantAggregator(context)), llm_turn(S1, S2, S3), rate=24000)
    assert assistant_messages(context) == [f"{S1} {S2} {S3}"]
