"""Heard-text tracking for text without spaces (Chinese, Japanese): word frames per character."""

from __future__ import annotations

from pc_helpers import Gate, InterruptWhen, Probe, make_tts, pipeline, run, words_of
from pipecat.frames.frames import LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator

from ttsbridge.emulator import Emulator

ZH1 = "你好，很高兴见到你。"
ZH2 = "我们明天用Python写代码。"
ZH3 = "请记得带上你的电脑。"
JA = "こんにちは、元気ですか。今日はいい天気ですね。"
#: Pace the emulator (twice real time) so a turn is still streaming when the interruption lands.
PACING = 2.0


def llm_turn(text: str, size: int = 3) -> list:
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + size]) for i in range(0, len(text), size)],
        LLMFullResponseEndFrame(),
    ]


def assistant_messages(context: LLMContext) -> list[str]:
    return [str(m.get("content")) for m in context.messages if m.get("role") == "assistant"]


async def test_japanese_turn_reaches_the_llm_context_as_written(emu: Emulator) -> None:
    tts = make_tts(emu)
    context = LLMContext()
    await run(pipeline(tts, LLMAssistantAggregator(context)), llm_turn(JA), rate=24000)
    assert assistant_messages(context) == [JA]  # no spaces put between the characters


async def test_interrupted_chinese_turn_leaves_only_the_heard_characters(emu: Emulator) -> None:
    emu.config.realtime_factor = PACING
    tts = make_tts(emu)
    context = LLMContext()
    gate, probe = Gate(), Probe(words=2)
    frames = [*llm_turn(ZH1 + ZH2 + ZH3), InterruptWhen(probe.words_seen)]
    await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=24000)

    assert gate.fired.is_set()
    assert words_of(probe.frames)[:2] == ["你", "好，"]  # timed per character
    messages = assistant_messages(context)
    assert len(messages) == 1
    said = messages[0]
    assert said, "the characters heard before the interruption reach the context"
    assert ZH1.startswith(said) and len(said) < len(ZH1)
