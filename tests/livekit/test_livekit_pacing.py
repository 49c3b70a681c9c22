"""``text_pacing`` as LiveKit's own plugins take it (``tts.SentenceStreamPacer | bool``), both plugins."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from livekit.agents import tts
from lk_helpers import S1, S2, S3, check_stream_events, duration_of, make_tts, run_stream, tone_len

from livekit.plugins import kitta
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.errors import TTSInvalidOptionError


def make_kitta(emu: Emulator, **kw: Any) -> kitta.TTS:
    client = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0}
    return kitta.TTS(emu.config.kitta.a_valid_key(), base_url=emu.base_url, voice=TONE_VOICE_ID,
                     client_options=client, **kw)  # fmt: skip


PLUGINS: dict[str, Callable[..., tts.TTS]] = {"nineninesix": make_tts, "kitta": make_kitta}


def sent(emu: Emulator) -> list[str]:
    """The texts the plugin sent: Nineninesix transcripts, Kitta segments."""
    ws = [m["transcript"].strip() for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    return ws + [s.strip() for s in emu.stats.kitta_segment_texts if s.strip()]


async def speak(emu: Emulator, plugin: str, **kw: Any) -> list[str]:
    """Stream three sentences word by word; check the stream and that every sentence was spoken once, in
    order; return what was sent."""
    t = PLUGINS[plugin](emu, **kw)
    try:
        events = await run_stream(t, f"{S1} {S2} {S3}")
    finally:
        await t.aclose()
    check_stream_events(t, events)
    texts = sent(emu)
    assert " ".join(texts) == f"{S1} {S2} {S3}"
    assert duration_of(events) == pytest.approx(sum(tone_len(s) for s in texts), abs=0.05)
    return texts


@pytest.mark.parametrize("plugin", list(PLUGINS))
async def test_default_pacer_sends_the_first_sentence_then_batches_the_rest(
    emu: Emulator, plugin: str
) -> None:
    texts = await speak(emu, plugin, text_pacing=True)
    # LiveKit's pacer: the first sentence at once, the rest in one batch once that audio is generated
    assert texts == [S1, f"{S2} {S3}"]


@pytest.mark.parametrize("plugin", list(PLUGINS))
async def test_a_pacer_instance_is_the_one_used(emu: Emulator, plugin: str) -> None:
    # max_text_length=1: every batch is full after one sentence, so each goes out on its own
    texts = await speak(emu, plugin, text_pacing=tts.SentenceStreamPacer(max_text_length=1))
    assert texts == [S1, S2, S3]


@pytest.mark.parametrize("plugin", list(PLUGINS))
@pytest.mark.parametrize("pacing", [False, None])
async def test_no_pacing_sends_each_sentence_at_once(emu: Emulator, plugin: str, pacing: bool | None) -> None:
    kw = {} if pacing is None else {"text_pacing": pacing}
    assert await speak(emu, plugin, **kw) == [S1, S2, S3]


@pytest.mark.parametrize("plugin", list(PLUGINS))
@pytest.mark.parametrize("bad", ["yes", 1, 0, object()])
def test_a_bad_text_pacing_names_the_field(emu: Emulator, plugin: str, bad: object) -> None:
    with pytest.raises(TTSInvalidOptionError, match="text_pacing") as info:
        PLUGINS[plugin](emu, text_pacing=bad)
    assert info.value.field == "text_pacing"
