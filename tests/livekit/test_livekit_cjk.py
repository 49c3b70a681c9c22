"""Aligned transcripts for text without spaces (Chinese, Japanese): timed per character, through the plugin."""

from __future__ import annotations

import pytest
from lk_helpers import duration_of, make_tts, run_stream, run_synthesize, timed_words

from ttsbridge.emulator import Emulator

ZH = "你好，很高兴见到你。我们明天用Python写代码。"
JA = "こんにちは、元気ですか。今日はいい天気ですね。"


async def test_chinese_stream_is_timed_per_character(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        events = await run_stream(t, ZH, by_word=False)
    finally:
        await t.aclose()
    words = timed_words(events)
    assert "".join(w.strip() for w in words) == ZH
    # one unit per ideograph, punctuation attached to the character before it, a Latin word kept whole
    assert [w.strip() for w in words][:4] == ["你", "好，", "很", "高"]
    assert "Python" in [w.strip() for w in words]
    assert [w.start_time for w in words] == sorted(w.start_time for w in words)
    assert all(w.end_time <= duration_of(events) + 1e-6 for w in words)
    assert words[-1].end_time == pytest.approx(duration_of(events), abs=0.01)


async def test_japanese_synthesize_is_timed_per_character(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        events = await run_synthesize(t, JA)
    finally:
        await t.aclose()
    words = timed_words(events)
    assert "".join(w.strip() for w in words) == JA
    assert [w.strip() for w in words][:5] == ["こ", "ん", "に", "ち", "は、"]
    # the last word ends with the audio (the emitter may pad its last frame by up to one 10 ms frame)
    assert words[-1].end_time == pytest.approx(duration_of(events), abs=0.02)
