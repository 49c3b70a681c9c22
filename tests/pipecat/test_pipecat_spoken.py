"""The spoken form through the Pipecat WebSocket service, both providers (docs/text.md): the provider gets the
spoken form, while word frames, the LLM context and the usage ledger's "heard" keep the LLM's own words.

Property: random replies from every class (tests/replies.py), cut into random LLM tokens, in SENTENCE or TOKEN
mode, interrupted once a random amount of audio has been pushed: the assistant message in the LLM context is
a word prefix of the LLM's text, never inside a rewritten span, whose last rewritten span had all been
played (the tone voice: 60 ms per character of each transcript). Regression cases for the Pipecat bugs named
in issue 31 (pipecat#4968, #5306/PR#5307, PR#5349, #5357, #5370).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pc_helpers import (
    Gate,
    InterruptWhen,
    Probe,
    WaitFor,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    words_of,
)
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.tts_service import TextAggregationMode

from replies import ADAPTER_PROPERTY, check_kept, normalizer, replies, sent_transcripts, tokens
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.pipecat import KittaTTSService
from ttsbridge.text import Lexicon, TextNormalizer

RATE = 16000
FAST = {"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0}


def service(emu: Emulator, provider: str, **kw: Any) -> Any:
    kw.setdefault("normalize_text", normalizer())
    kw.setdefault("stop_frame_timeout_s", 60.0)
    if provider == "kitta":
        return KittaTTSService(
            emu.config.kitta.a_valid_key(),
            base_url=emu.base_url,
            settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
            provider_options=FAST,
            **kw,
        )
    return make_tts(emu, **kw)


def llm_turn(toks: list[str]) -> list[Frame]:
    return [LLMFullResponseStartFrame(), *[LLMTextFrame(t) for t in toks], LLMFullResponseEndFrame()]


class AudioProbe(Probe):
    """A probe that also signals once ``seconds`` of audio have passed it."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.enough = asyncio.Event()
        self._bytes = int(seconds * RATE) * 2
        self._seen = 0

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        if isinstance(frame, TTSAudioRawFrame):
            self._seen += len(frame.audio)
            if self._seen >= self._bytes:
                self.enough.set()
        elif isinstance(frame, TTSStoppedFrame):
            self.enough.set()  # the reply ended before the cut: the interruption comes after it
        await super().process_frame(frame, direction)


def said(context: LLMContext) -> str:
    return " ".join(str(m["content"]) for m in context.messages if m["role"] == "assistant")


async def _interrupted(provider: str, toks: list[str], cut_s: float, mode: str) -> None:
    text = "".join(toks)
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
        emu.config.realtime_factor = emu.config.kitta.realtime_factor = 4.0  # still streaming at the cut
        kw: dict[str, Any] = {"text_aggregation_mode": TextAggregationMode.TOKEN} if mode == "token" else {}
        tts = service(emu, provider, **kw)
        norm = tts.text_normalizer
        context = LLMContext()
        gate, probe = Gate(), AudioProbe(cut_s)
        frames = [*llm_turn(toks), InterruptWhen(probe.enough, timeout=30.0)]
        _, up = await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=RATE)
        assert not errors_of(up)
        seen = probe.frames
        cut = next((i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame)), len(seen))
        played = len(audio_of(seen[:cut])) / 2 / RATE
        check_kept(said(context), text, played, sent_transcripts(emu), norm)
        assert not re.search(r"\d", "".join(sent_transcripts(emu))), sent_transcripts(
            emu
        )  # every number went out spoken


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], float, str]:
    text = draw(replies(min_items=4, max_items=10))
    return draw(tokens(text)), draw(st.floats(0.3, 3.5)), draw(st.sampled_from(["sentence", "token"]))


@ADAPTER_PROPERTY
@given(case=cases())
def test_nineninesix_keeps_the_llms_words_at_any_interruption(case: tuple[list[str], float, str]) -> None:
    asyncio.run(_interrupted("nineninesix", *case))


@ADAPTER_PROPERTY
@given(case=cases())
def test_kitta_keeps_the_llms_words_at_any_interruption(case: tuple[list[str], float, str]) -> None:
    asyncio.run(_interrupted("kitta", *case))


# -- regressions: the Pipecat bugs of issue 31


async def _full_turn(
    emu: Emulator, text: str, provider: str = "nineninesix", **kw: Any
) -> tuple[str, list[str]]:
    """One uninterrupted turn: (the assistant message, the word frames)."""
    tts = service(emu, provider, **kw)
    context, probe = LLMContext(), Probe()
    toks = [text[i : i + 4] for i in range(0, len(text), 4)]
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), llm_turn(toks), rate=RATE)
    assert not errors_of(up)
    return said(context), words_of(probe.frames)


async def test_4968_a_one_word_to_many_respelling_keeps_the_context(emu: Emulator) -> None:
    text = "Nineninesix can help. Ask Nineninesix about API limits today."
    message, words = await _full_turn(emu, text)
    assert message == text
    assert words == text.split()
    spoken = " ".join(sent_transcripts(emu))
    assert "nine nine six" in spoken and "Nineninesix" not in spoken and "A P I" in spoken


async def test_5306_markup_in_the_llm_text_does_not_pin_the_caption_cursor(emu: Emulator) -> None:
    text = "**Note:** call `support` today. See [the docs](https://x.io) and *then* reply. Thanks!"
    message, words = await _full_turn(emu, text)
    assert message == text  # the context keeps the LLM's markdown
    assert words == text.split()  # every caption word, in order: the cursor went through the markup
    spoken = " ".join(sent_transcripts(emu))
    assert not re.search(r"[*`\[\]]|https", spoken), spoken


async def test_5357_curly_quotes_are_kept_in_the_context_and_folded_for_the_provider(emu: Emulator) -> None:
    text = "“It’s the ‘best’ day,” she said. Don’t worry."
    message, words = await _full_turn(emu, text)
    assert message == text and words == text.split()
    spoken = " ".join(sent_transcripts(emu))
    assert "’" not in spoken and "“" not in spoken and "It's" in spoken


async def test_5370_the_context_records_the_llms_spelling_not_the_providers(emu: Emulator) -> None:
    text = "Your total is $1,234.50, due 12/05/2025. Call +1 (415) 555-0134."
    message, words = await _full_turn(emu, text)
    assert message == text
    assert "$1,234.50," in words and "dollars" not in message and "four" not in message
    assert "one thousand two hundred thirty-four dollars and fifty cents" in " ".join(sent_transcripts(emu))


async def test_5349_a_spelled_out_span_is_heard_whole_or_not_at_all(emu: Emulator) -> None:
    """A phone number is spelled digit by digit (one span of the map): cut in its middle, the context keeps
    the words before it and none of it; cut after it, all of it. The words of the same sentence before it are
    kept either way (the sentence is not all-or-nothing, the span is)."""
    text = "Please call +1 (415) 555-0134 after lunch."
    spoken = "Please call plus one, four one five, five five five, zero one three four after lunch."
    assert normalizer().normalize(text).spoken == spoken
    middle = 0.06 * spoken.index("five five five")
    after = 0.06 * (spoken.index("after") + 2) + 0.3
    for cut, kept in ((middle, "Please call"), (after, "Please call +1 (415) 555-0134")):
        emu.stats.messages.clear()
        emu.config.realtime_factor = 2.0
        tts = service(emu, "nineninesix")
        context = LLMContext()
        gate, probe = Gate(), AudioProbe(cut)
        frames = [*llm_turn([text]), InterruptWhen(probe.enough)]
        await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames, rate=RATE)
        assert gate.fired.is_set()
        assert said(context).startswith(kept)
        rest = said(context)[len(kept) :].split()
        assert not rest or rest[0] == "after", said(context)  # never a part of the number


async def test_the_ledger_shows_written_and_spoken_characters(emu: Emulator) -> None:
    text = "It costs $5 today."
    tts = service(emu, "nineninesix")
    usages: list[Any] = []
    tts.add_event_handler("on_turn_usage", lambda _svc, usage: usages.append(usage))
    await run(pipeline(tts), llm_turn([text]), rate=RATE)
    [usage] = usages
    assert usage.characters_written == len(text)
    assert usage.characters_sent == usage.characters_billed == len("It costs five dollars today.")  # spoken
    assert usage.characters_heard == len(text)  # the LLM's words, all played


async def test_off_with_one_option(emu: Emulator) -> None:
    text = "It costs $5 today."
    message, _ = await _full_turn(emu, text, normalize_text=False)
    assert message == text and "$5" in " ".join(sent_transcripts(emu))


async def test_a_lexicon_changed_while_running_applies_to_the_next_turn(emu: Emulator) -> None:
    lexicon = Lexicon()
    tts = service(emu, "nineninesix", normalize_text=TextNormalizer(lexicon=lexicon))
    gate, probe, changed = Gate(), Probe(), asyncio.Event()

    async def change_after_the_first_turn() -> None:
        await probe.stopped.wait()
        lexicon.add("Acme", "ack me")
        changed.set()

    task = asyncio.create_task(change_after_the_first_turn())
    turn = llm_turn(["Acme says hi."])
    await run(pipeline(gate, tts, probe), [*turn, WaitFor(changed), *turn], rate=RATE)
    await task
    assert [s.strip() for s in sent_transcripts(emu)] == ["Acme says hi.", "ack me says hi."]
