"""``word_timestamps=False``: no word-level ``TTSTextFrame``\\ s; Pipecat commits each turn's text whole once its
audio context has played (as for its own services without timestamps), nothing of an interrupted turn."""

from __future__ import annotations

import pytest
from pc_helpers import S1, S2, S3, Gate, InterruptWhen, Probe, audio_of, errors_of, make_tts, pipeline, run
from pipecat.frames.frames import TTSAudioRawFrame, TTSTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from test_pipecat_http import make_http_tts
from test_pipecat_interrupt import PACING, assistant_messages, llm_turn
from test_pipecat_kitta import make_kitta
from test_pipecat_usage import collect

from ttsbridge.emulator import Emulator
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.policy.usage import TurnEnd


def text_frames_after_the_last_audio(frames: list) -> tuple[list[str], list[str]]:
    """The TTSTextFrames before the last audio frame, and those after it."""
    last = max(i for i, f in enumerate(frames) if isinstance(f, TTSAudioRawFrame))
    before = [f.text for f in frames[:last] if isinstance(f, TTSTextFrame)]
    after = [f.text for f in frames[last:] if isinstance(f, TTSTextFrame)]
    return before, after


@pytest.mark.parametrize("service", ["ws", "kitta"])
async def test_a_whole_turn_is_committed_once_its_audio_has_played(emu: Emulator, service: str) -> None:
    tts = make_tts(emu, word_timestamps=False) if service == "ws" else make_kitta(emu, word_timestamps=False)
    usages = collect(tts)
    probe, context = Probe(), LLMContext()
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), llm_turn(S1, S2, S3))

    assert not errors_of(up)
    assert audio_of(probe.frames)
    before, after = text_frames_after_the_last_audio(probe.frames)
    assert before == [], "no word frames while the audio plays"
    assert " ".join(after).split() == f"{S1} {S2} {S3}".split()
    assert assistant_messages(context) == [f"{S1} {S2} {S3}"]
    [usage] = usages
    assert usage.ended is TurnEnd.DONE
    assert usage.characters_heard == usage.characters_sent > 0


async def test_an_interrupted_turn_commits_nothing_and_hears_nothing(emu: Emulator) -> None:
    emu.config.realtime_factor = PACING
    tts = make_tts(emu, word_timestamps=False)
    usages = collect(tts)
    gate, probe, context = Gate(), Probe(), LLMContext()
    frames = [*llm_turn(S1, S2, S3), InterruptWhen(probe.first_audio)]
    await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames)

    assert gate.fired.is_set()
    assert not [f for f in probe.frames if isinstance(f, TTSTextFrame)]
    assert not any(m.strip() for m in assistant_messages(context))
    await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, timeout=5.0)
    [usage] = usages
    assert usage.ended is TurnEnd.CANCELLED
    assert usage.characters_heard == 0 < usage.characters_billed


async def test_the_http_service_commits_the_whole_text_after_its_audio(emu: Emulator) -> None:
    tts = make_http_tts(emu, word_timestamps=False)
    probe, context = Probe(), LLMContext()
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), llm_turn(S1, S2))

    assert not errors_of(up)
    assert assistant_messages(context) == [f"{S1} {S2}"]
    before, after = text_frames_after_the_last_audio(probe.frames)
    assert before == [], "no word frames while the audio plays"
    assert " ".join(after).split() == f"{S1} {S2}".split()


@pytest.mark.parametrize("value", ["no", 0, None])
def test_word_timestamps_must_be_a_bool(value: object) -> None:
    with pytest.raises(TTSInvalidOptionError) as info:
        make_tts(Emulator(), word_timestamps=value)
    assert info.value.field == "word_timestamps"
    assert "True or False" in str(info.value)


async def test_a_turn_failing_after_audio_commits_nothing_and_hears_nothing(emu: Emulator) -> None:
    tts = make_tts(emu, word_timestamps=False)
    usages = collect(tts)
    probe, context = Probe(), LLMContext()
    turn = llm_turn(S1, f"{S2} [[error:generation_failed:5]]", S3)
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), turn)

    assert errors_of(up)
    assert audio_of(probe.frames), "the failure came after some audio"
    assert not any(m.strip() for m in assistant_messages(context))
    [usage] = usages
    assert usage.ended is TurnEnd.FAILED
    assert usage.characters_heard == 0, (
        "nothing of a failed turn reaches the context: nothing counts as heard"
    )
