"""TOKEN mode (``TextAggregationMode.TOKEN``): Pipecat's text transforms and filters see whole clauses.

The LLM streams "4", "2": a transform that rewrites numbers must see "42" once (not "4" then "2"), the
provider must be sent the rewritten clause, and the LLM context must keep the words as the LLM wrote them.
All through Pipecat's public API (``text_transforms=``) against the emulator.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from pc_helpers import (
    S1,
    Gate,
    InterruptWhen,
    Probe,
    errors_of,
    make_tts,
    pipeline,
    run,
    words_of,
)
from pipecat.frames.frames import LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import LLMAssistantAggregator
from pipecat.services.tts_service import TextAggregationMode, TTSService

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.pipecat import KittaTTSService, NineninesixHttpTTSService

TOKEN = TextAggregationMode.TOKEN
SAID = "Your total is 42 dollars, see https://shop.example.com/o/42 for details. Thanks!"
#: How a streaming LLM cuts SAID: the number and the URL arrive in pieces.
TOKENS = ["Your", " total", " is", " ", "4", "2", " dollars", ",", " see", " https", "://", "shop", ".",
          "example", ".com", "/o/", "4", "2", " for", " details", ".", " Thanks", "!"]  # fmt: skip
NUMBERS = {"42": "forty-two"}
#: What the TTS is sent (and its word frames carry, as Pipecat's in SENTENCE mode); the context keeps SAID.
SPOKEN = SAID.replace("42", "forty-two")


def number_transform(seen: list[str]) -> Callable[[str, str], Any]:
    async def transform(text: str, text_type: str) -> str:
        seen.append(text)
        return re.sub(r"\b\d+\b", lambda m: NUMBERS.get(m.group(0), m.group(0)), text)

    return transform


class UrlTransform:
    """A text transform replacing every URL with "the link" (it must see a URL whole to recognise it). Was a
    ``BaseTextFilter`` passed as ``text_filters=``, which Pipecat 1.14 deprecates for ``text_transforms=``."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def __call__(self, text: str, text_type: str) -> str:
        self.seen.append(text)
        return re.sub(r"https?://[^\s,]+?(?=\.?(?:\s|$))", "the link", text)


def token_turn(tokens: list[str]) -> list:
    return [LLMFullResponseStartFrame(), *[LLMTextFrame(t) for t in tokens], LLMFullResponseEndFrame()]


def make_kitta(emu: Emulator, **kwargs: Any) -> KittaTTSService:
    return KittaTTSService(
        emu.config.kitta.a_valid_key(),
        base_url=emu.base_url,
        settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
        provider_options={"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0},
        **kwargs,
    )


def make_http(emu: Emulator, **kwargs: Any) -> NineninesixHttpTTSService:
    return NineninesixHttpTTSService(
        emu.api_key,
        base_url=emu.base_url,
        settings=NineninesixHttpTTSService.Settings(voice=TONE_VOICE_ID),
        **kwargs,
    )


def sent_to_provider(emu: Emulator) -> list[str]:
    """Every text a service sent: Nineninesix WebSocket transcripts, Kitta segments."""
    ws = [m["transcript"] for _, m in emu.stats.messages if m.get("transcript", "").strip()]
    return ws + list(emu.stats.kitta_segment_texts)


def assistant_said(context: LLMContext) -> list[str]:
    return [str(m["content"]) for m in context.messages if m["role"] == "assistant"]


MAKERS: dict[str, Callable[..., TTSService]] = {
    "nineninesix": make_tts,
    "kitta": make_kitta,
    "http": make_http,
}


@pytest.mark.parametrize("service", list(MAKERS))
async def test_a_transform_sees_a_streamed_number_once(emu: Emulator, service: str) -> None:
    seen: list[str] = []
    tts = MAKERS[service](
        emu,
        text_aggregation_mode=TOKEN,
        text_transforms=[("*", number_transform(seen))],
        stop_frame_timeout_s=60.0,
        normalize_text=False,  # Pipecat's transform alone (ttsbridge's own: tests/text)
    )
    context = LLMContext()
    probe = Probe()
    _, up = await run(pipeline(tts, probe, LLMAssistantAggregator(context)), token_turn(TOKENS))

    assert not errors_of(up)
    # the transform saw whole clauses: each "42" inside one call, never a lone digit
    assert "".join(seen) == SAID
    assert sum(s.count("42") for s in seen) == 2
    assert not [s for s in seen if s.strip() in {"4", "2"}]
    # the provider was sent the rewritten text, once
    if service != "http":
        sent = "".join(sent_to_provider(emu))
        assert sent.count("forty-two") == 2 and not re.search(r"\d", sent)
    else:
        assert emu.stats.credits_charged == sum(len(re.sub(r"42", "forty-two", s).strip()) for s in seen)
    # the LLM context keeps what the LLM wrote, every word once and in order; word frames carry the spoken words
    assert assistant_said(context) == [SAID]
    assert " ".join(words_of(probe.frames)) == SPOKEN


async def test_a_text_transform_sees_a_streamed_url_whole(emu: Emulator) -> None:
    url_filter = UrlTransform()
    tts = make_tts(
        emu,
        text_aggregation_mode=TOKEN,
        text_transforms=[("*", url_filter)],
        stop_frame_timeout_s=60.0,
        normalize_text=False,
    )
    context = LLMContext()
    _, up = await run(pipeline(tts, LLMAssistantAggregator(context)), token_turn(TOKENS))

    assert not errors_of(up)
    assert [s for s in url_filter.seen if "https://shop.example.com/o/42" in s]
    sent = "".join(sent_to_provider(emu))
    assert "the link" in sent and "example" not in sent and "https" not in sent
    assert assistant_said(context) == [SAID]


async def test_sentence_mode_transforms_still_see_sentences(emu: Emulator) -> None:
    seen: list[str] = []
    tts = make_tts(
        emu, text_transforms=[("*", number_transform(seen))], stop_frame_timeout_s=60.0, normalize_text=False
    )
    context = LLMContext()
    _, up = await run(pipeline(tts, LLMAssistantAggregator(context)), token_turn(TOKENS))

    assert not errors_of(up)
    assert [s.strip() for s in seen] == [
        "Your total is 42 dollars, see https://shop.example.com/o/42 for details.",
        "Thanks!",
    ]
    assert "".join(sent_to_provider(emu)).count("forty-two") == 2
    assert assistant_said(context) == [SAID]


async def test_barge_in_drops_the_clause_held_back(emu: Emulator) -> None:
    """Text held back for a clause end when the user barges in is never spoken in the next turn."""
    emu.config.realtime_factor = 2.0
    tts = make_tts(emu, text_aggregation_mode=TOKEN, stop_frame_timeout_s=60.0)
    gate, probe = Gate(), Probe()
    held = [LLMFullResponseStartFrame(), *[LLMTextFrame(t) for t in [S1, " Your", " ord"]]]
    frames = [*held, InterruptWhen(probe.first_audio), *token_turn(["Sure", ",", " go", " ahead", "."])]
    _, up = await run(pipeline(gate, tts, probe), frames)

    assert not errors_of(up)
    sent = sent_to_provider(emu)
    assert sent[0].strip() == "Hello there,"
    assert not [s for s in sent if "Your" in s or "ord" in s]
    assert "".join(sent).endswith("Sure, go ahead.")


async def test_barge_in_leaves_the_heard_prefix_as_written_in_the_context(emu: Emulator) -> None:
    """Interrupted after four words with a transform on: the context holds the heard words as the LLM wrote
    them ("42", not "forty-two"), and nothing after them."""
    emu.config.realtime_factor = 2.0
    tts = make_tts(emu, text_aggregation_mode=TOKEN, text_transforms=[("*", number_transform([]))])
    context = LLMContext()
    gate, probe = Gate(), Probe(words=4)
    frames = [*token_turn(TOKENS), InterruptWhen(probe.words_seen)]
    _, up = await run(pipeline(gate, tts, probe, LLMAssistantAggregator(context)), frames)

    assert not errors_of(up) and gate.fired.is_set()
    [message] = assistant_said(context)
    said = message.split()
    assert len(said) >= 4 and said == SAID.split()[: len(said)]
    assert len(said) < len(SAID.split())
    assert "forty-two" not in message


async def test_clause_aggregator_releases_clauses_flushes_the_rest_and_forgets_on_interruption() -> None:
    from pipecat.utils.text.base_text_aggregator import TextType

    from ttsbridge.pipecat._aggregator import ClauseTokenAggregator

    agg = ClauseTokenAggregator()
    out = []
    for token in ["Hi", " there", ",", " 4", "2", " is"]:
        out += [a async for a in agg.aggregate(token)]
    assert [(a.text, a.type) for a in out] == [("Hi there, ", TextType.TOKEN)]
    assert agg.text.text == "42 is"
    rest = await agg.flush()
    assert rest is not None and rest.text == "42 is" and await agg.flush() is None
    _ = [a async for a in agg.aggregate("held back")]
    await agg.handle_interruption()
    assert await agg.flush() is None
