"""Whole calls against an emulated carrier (Twilio, Telnyx, Exotel, Plivo), with both providers: what the LLM
context keeps after a barge-in, the goodbye played to its last sample before the hang-up, the drain cut short
by a barge-in, marks a clear returned, and a carrier that never echoes.

Every carrier plays behind a 0.6 s jitter buffer and 30 ms of network each way (``phone.phone_call``). The
emulator's tone voice renders each sentence as one tone of 60 ms per character, so where each word ends in
the audio is known (``tests/heard.py``).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from phone import phone_call
from pipecat.frames.frames import EndFrame, TTSSpeakFrame

from heard import PrefixError, prefix_error
from otel_support import attrs, named
from ttsbridge.emulator import Emulator, tone_duration
from ttsbridge.emulator.carrier import EmulatedCarrier

CARRIERS = ["twilio", "telnyx", "exotel", "plivo"]
PROVIDERS = ["nineninesix", "kitta"]

GREETING = "Hello, thanks for calling."
REPLY = "Sure, I can help you with that. This is a test of the new booking system we built for everyone."
GOODBYE = "Thank you for calling, and have a wonderful day."
#: Seconds into the reply at which the caller speaks: inside its first sentence, in "with" (1.26-1.50 s).
CUT_AT = 1.3


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", text) if s]


def _last_sound_s(pcm: bytes, rate: int, threshold: int = 200) -> float:
    """Where the last audible sample of ``pcm`` ends (s)."""
    samples = np.frombuffer(pcm, dtype="<i2")
    loud = np.flatnonzero(np.abs(samples.astype(np.int32)) > threshold)
    return float(loud[-1] + 1) / rate if loud.size else 0.0


async def _greeted(emu: Emulator, phone: EmulatedCarrier, bot: object) -> float:
    """The bot greets (a TTSSpeakFrame: its turn calibrates the voice's rate); returns the audio it took."""
    await bot.worker.queue_frame(TTSSpeakFrame(GREETING))  # type: ignore[attr-defined]
    # played to its end: its final mark came back
    await phone.wait_until(lambda: any(h.outcome == "played" for h in bot.call.heard))  # type: ignore[attr-defined]
    greeting = phone.received_s
    await phone.wait_played(greeting)
    return greeting


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("carrier", CARRIERS)
async def test_a_barge_in_keeps_the_words_the_carrier_played(
    emulator: Emulator, carrier: str, provider: str, spans: InMemorySpanExporter
) -> None:
    emulator.config.realtime_factor = emulator.config.kitta.realtime_factor = 2.0  # generating while it plays
    traced = (carrier, provider) == ("twilio", "nineninesix")  # the span: once is enough
    async with phone_call(
        emulator,
        carrier=carrier,
        provider=provider,
        replies={"go": REPLY, "wait": "Okay."},
        utterances={"1": "go", "2": "wait"},
        tracing=traced,
    ) as (bot, phone):
        greeting = await _greeted(emulator, phone, bot)
        await phone.say("1")
        await phone.wait_played(greeting + CUT_AT)
        await phone.press("2")  # the caller talks over the reply
        await phone.wait_until(lambda: any(c.dropped_s > 0 for c in phone.clears))
        await phone.press("#")
        await phone.wait_until(lambda: len(bot.llm.seen) == 2)
        await phone.hang_up()

    clear = next(c for c in phone.clears if c.dropped_s > 0)
    position = clear.played_s - greeting  # of the reply, when the clear reached the carrier
    kept = bot.kept()
    assert REPLY.startswith(" ".join(kept.split())), kept
    err = prefix_error(kept, _sentences(REPLY), position)
    assert bot.call is not None
    record = next(h for h in bot.call.heard if h.outcome == "interrupted")
    estimate: PrefixError = prefix_error(record.estimate, _sentences(REPLY), position)
    print(f"\n{carrier}/{provider}: acks {err}\n{carrier}/{provider}: push-time estimate {estimate}")

    # what the carrier played, within one word (a word counts once it has begun, as Pipecat's own)
    assert abs(err.words) <= 1, err
    assert record.source == "carrier" and " ".join(record.text.split()) == " ".join(kept.split())
    # the estimate, from the same run, claims words that were still in the jitter buffer
    assert estimate.words >= err.words + 1, (estimate, err)

    # marks the clear returned (Plivo: dropped) never counted as played
    returned = [m for m in phone.marks if m.returned_by_clear or m.dropped == "clear"]
    assert returned, "the clear left no mark pending"
    for m in returned:
        mark = bot.call.book.find(m.name)
        assert mark is not None and mark.state == "cleared", (m, mark)
    # (an echo that crossed the clear on the wire counts as cleared too: docs/telephony.md)
    assert bot.call.cleared_echoes >= sum(m.returned_by_clear for m in phone.marks)
    assert record.heard_s is not None and record.heard_s <= position + 0.001
    assert not phone.errors, phone.errors

    # the usage ledger's heard figure comes from the same position, and so does the span's
    reply = max(bot.usage, key=lambda u: u.characters_sent)
    assert abs(reply.characters_heard - len(kept.strip()) - 1) <= 1, (reply.characters_heard, kept)
    if traced:
        greeted, cut = (attrs(s) for s in named(spans, "tts")[:2])  # the greeting's, then the reply's
        assert greeted["ttsbridge.heard_source"] == "carrier" and greeted["ttsbridge.playback"] == "played"
        assert greeted["ttsbridge.characters_heard"] == len(GREETING)
        assert cut["ttsbridge.heard_source"] == "carrier" and cut["ttsbridge.playback"] == "interrupted"
        assert cut["ttsbridge.heard_audio_s"] == pytest.approx(record.heard_s, abs=1e-3)
        assert cut["ttsbridge.characters_heard"] == reply.characters_heard < reply.characters_sent
        assert cut["tts.interrupted"] is True


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("carrier", CARRIERS)
async def test_goodbye_then_end_frame_is_played_to_the_last_sample(
    emulator: Emulator, carrier: str, provider: str
) -> None:
    async with phone_call(emulator, carrier=carrier, provider=provider) as (bot, phone):
        await bot.worker.queue_frames([TTSSpeakFrame(GOODBYE), EndFrame()])
        await phone.wait_until(lambda: phone.hangup is not None)

    assert phone.hangup is not None and phone.hangup.by == "bot"
    assert _last_sound_s(phone.received_pcm(), phone.rate) >= tone_duration(GOODBYE) - 0.1
    # nothing audible was left unplayed: the goodbye played to its last sample (what the hang-up cut is the
    # silence Pipecat's output transport sends after an EndFrame)
    assert _last_sound_s(phone.unplayed_pcm(), phone.rate) == 0.0, phone.hangup
    assert bot.call is not None and bot.call.drains[0].reason == "played", bot.call.drains
    assert not phone.errors, phone.errors


@pytest.mark.parametrize(("carrier", "provider"), [("twilio", "nineninesix"), ("telnyx", "kitta")])
async def test_without_acks_the_same_goodbye_is_cut(emulator: Emulator, carrier: str, provider: str) -> None:
    async with phone_call(emulator, carrier=carrier, provider=provider, acks=False) as (bot, phone):
        await bot.worker.queue_frames([TTSSpeakFrame(GOODBYE), EndFrame()])
        await phone.wait_until(lambda: phone.hangup is not None)

    assert phone.hangup is not None and phone.hangup.by == "bot"
    cut = _last_sound_s(phone.unplayed_pcm(), phone.rate)
    print(f"\nwithout acks ({carrier}/{provider}): the last {cut:.2f} s of the goodbye were never played")
    assert cut > 0.2, phone.hangup


@pytest.mark.parametrize(("carrier", "provider"), [("twilio", "kitta"), ("plivo", "nineninesix")])
async def test_a_barge_in_during_the_drain_hangs_up_at_once(
    emulator: Emulator, carrier: str, provider: str
) -> None:
    # unpaced: the goodbye is all pushed long before the carrier has played it, and the EndWorkerFrame that
    # follows it waits in the drain
    async with phone_call(
        emulator,
        carrier=carrier,
        provider=provider,
        replies={"bye": GOODBYE, "wait": "Okay."},
        utterances={"1": "bye", "2": "wait"},
        end_after=frozenset({"bye"}),
    ) as (bot, phone):
        await phone.say("1")
        await phone.wait_until(lambda: phone.received_s > 0)
        start = phone.played_s()
        await phone.wait_played(start + 0.5)
        await phone.press("2")
        await phone.wait_until(lambda: phone.hangup is not None)

    assert bot.call is not None
    assert bot.call.drains[0].reason == "barge-in", bot.call.drains
    clear = next(c for c in phone.clears if c.dropped_s > 0)
    assert phone.hangup is not None and phone.hangup.by == "bot"
    # the hang-up did not wait for the goodbye the clear dropped
    assert phone.hangup.at < clear.at + clear.dropped_s, (phone.hangup, clear)


@pytest.mark.parametrize(("carrier", "provider"), [("twilio", "nineninesix"), ("exotel", "kitta")])
async def test_a_carrier_that_never_echoes_gets_the_estimate_and_a_bounded_wait(
    emulator: Emulator, carrier: str, provider: str
) -> None:
    emulator.config.realtime_factor = emulator.config.kitta.realtime_factor = 2.0
    async with phone_call(
        emulator,
        carrier=carrier,
        provider=provider,
        echo_marks=False,
        replies={"go": REPLY, "wait": "Okay."},
        utterances={"1": "go", "2": "wait"},
    ) as (bot, phone):
        await phone.say("1")
        await phone.wait_played(CUT_AT)
        await phone.press("2")
        await phone.wait_until(lambda: any(c.dropped_s > 0 for c in phone.clears))
        await phone.press("#")
        await phone.wait_until(lambda: len(bot.llm.seen) == 2)
        await phone.wait_until(lambda: len(bot.call.heard) == 2)  # type: ignore[union-attr]  # "Okay." is over
        await bot.worker.queue_frames([TTSSpeakFrame(GOODBYE), EndFrame()])
        await phone.wait_until(lambda: phone.hangup is not None)

    assert bot.call is not None
    record = next(h for h in bot.call.heard if h.outcome == "interrupted")
    kept = bot.kept(1)
    assert record.source == "estimate" and record.heard_s is None
    assert " ".join(kept.split()) == " ".join(record.estimate.split()), (kept, record)
    # the hang-up waited for the bound (the audio unplayed plus the margin), no longer, and the goodbye played
    drain = bot.call.drains[0]  # the TTS's, holding the EndFrame; the serializer's follows, nothing left out
    assert drain.reason == "bound" and drain.bound_s is not None, bot.call.drains
    assert drain.waited_s <= drain.bound_s + 0.5, drain  # (the slack: the event loop waking up late)
    assert [d.reason for d in bot.call.drains][1:] == ["idle"], bot.call.drains
    assert phone.hangup is not None
    assert _last_sound_s(phone.unplayed_pcm(), phone.rate) == 0.0, phone.hangup


@pytest.mark.parametrize(("carrier", "provider"), [("telnyx", "nineninesix")])
async def test_the_caller_hanging_up_ends_the_drain_at_once(
    emulator: Emulator, carrier: str, provider: str
) -> None:
    async with phone_call(
        emulator,
        carrier=carrier,
        provider=provider,
        replies={"bye": GOODBYE},
        utterances={"1": "bye"},
        end_after=frozenset({"bye"}),
    ) as (bot, phone):
        await phone.say("1")
        await phone.wait_until(lambda: phone.received_s > 0)
        await phone.wait_played(phone.played_s() + 0.3)
        await phone.hang_up()  # `stop`, then the socket closes

    assert bot.call is not None
    assert bot.call.drains[0].reason == "hung-up", bot.call.drains
    drain = bot.call.drains[0]
    assert drain.bound_s is not None and drain.waited_s < drain.bound_s
