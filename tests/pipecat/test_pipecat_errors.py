"""Every catalog error, a dropped socket, a stalled server and a bad key, as a Pipecat pipeline sees them.

The services run with Pipecat's audio-context idle timeout raised to a minute: a failed turn must end at
once because the service ends it, not because Pipecat gave up waiting (the run itself is bounded far below).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
from loguru import logger
from pc_helpers import (
    S1,
    S2,
    S3,
    Gate,
    Probe,
    WaitFor,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    tone_len,
)
from pipecat.frames.frames import (
    ErrorFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSSpeakFrame,
    TTSStoppedFrame,
    TTSTextFrame,
)
from pipecat.utils.errors import ErrorCategory

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault
from ttsbridge.pipecat import KittaTTSService, NineninesixHttpTTSService, NineninesixTTSService

NEXT = "Is there anything else?"
NO_IDLE_TIMEOUT = {"stop_frame_timeout_s": 60.0}


def turn(*sentences: str) -> list:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 6]) for i in range(0, len(text), 6)],
        LLMFullResponseEndFrame(),
    ]


async def two_turns(tts: NineninesixTTSService, first: list, second: list) -> tuple[list, list]:
    """Run ``first``, then ``second`` once the first turn has stopped (as a conversation would)."""
    gate, probe = Gate(), Probe()
    _, up = await run(pipeline(gate, tts, probe), [*first, WaitFor(probe.stopped), *second], rate=24000)
    return probe.frames, up


def contexts(frames: list) -> list[str]:
    return list(dict.fromkeys(f.context_id for f in frames if isinstance(f, TTSAudioRawFrame)))


def our_errors(up: list) -> list[ErrorFrame]:
    return [e for e in errors_of(up) if isinstance(e.processor, NineninesixTTSService)]


def assert_heard_part_of(words: list[str], sentence: str) -> None:
    """The words are the start of ``sentence``: all of it but, at most, the last two words (word timing is
    estimated; an uncalibrated rate may not have reached them when the turn failed)."""
    expected = sentence.split()
    assert words == expected[: len(words)]
    assert len(words) >= len(expected) - 2


# error_code -> (category, fatal, socket closes)
CATALOG = {
    "unknown_model": (ErrorCategory.INVALID_REQUEST, True, True),
    "insufficient_credits": (ErrorCategory.QUOTA, False, True),  # credits can be topped up mid-call
    "voice_not_found": (ErrorCategory.INVALID_REQUEST, True, True),
    "unsupported_container": (ErrorCategory.INVALID_REQUEST, True, True),
    "unsupported_encoding": (ErrorCategory.INVALID_REQUEST, True, True),
    "invalid_sample_rate": (ErrorCategory.INVALID_REQUEST, True, True),
    "generation_failed": (ErrorCategory.SERVER, False, False),
    "not_initialized": (ErrorCategory.SERVER, False, True),
}
# context_not_found / missing_context_id answer a cancel (cancel_ack) and are absorbed then; an unsolicited
# context_not_found fails its turn (docs/nineninesix.md). Their classification is checked in test_pipecat_units.py.


@pytest.mark.parametrize("code", sorted(CATALOG))
async def test_catalog_error(emu: Emulator, code: str) -> None:
    category, fatal, closes = CATALOG[code]
    emu.add_fault(Fault(trigger="warehouse", action="error", error_code=code))
    tts = make_tts(emu, **NO_IDLE_TIMEOUT)
    down, up = await two_turns(tts, turn(S1, S2, S3), turn(NEXT))

    errors = our_errors(up)
    assert len(errors) == 1, [e.error for e in errors]  # reported once, with its real cause
    err = errors[0]
    assert err.category is category
    assert code in err.error
    assert not err.fatal  # the deprecated flag stays unset; usability carries the verdict
    assert tts.is_usable is not fatal
    ctxs = contexts(down)
    first = ctxs[0]
    # the failed turn ends with a stop frame; what it had played (sentence 1) stays, nothing of sentence 3
    assert any(isinstance(f, TTSStoppedFrame) and f.context_id == first for f in down)
    assert len(audio_of(down, first)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.05)
    words = [f.text for f in down if isinstance(f, TTSTextFrame) and f.context_id == first]
    assert_heard_part_of(words, S1)
    if fatal:
        # the service is written off: the next turn is not spoken
        assert len(ctxs) == 1
    else:
        # the pipeline goes on: the next turn plays in full
        assert len(ctxs) == 2
        assert len(audio_of(down, ctxs[1])) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)
        assert emu.stats.ws_connections == (2 if closes else 1)


def between_turns(event: asyncio.Event, action: Callable[[], None]) -> tuple[asyncio.Task[None], WaitFor]:
    """Run ``action`` once ``event`` is set (the first turn has stopped); the returned ``WaitFor`` holds the
    next turn until it has run."""
    done = WaitFor()

    async def run_action() -> None:
        await event.wait()
        action()
        done.event.set()

    return asyncio.create_task(run_action()), done


def server_contexts(emu: Emulator) -> set[str]:
    return {m["context_id"] for _, m in emu.stats.messages if m.get("context_id")}


@pytest.mark.parametrize("service", [NineninesixTTSService, NineninesixHttpTTSService])
async def test_out_of_credits_fails_one_turn_once_and_the_next_turn_speaks(
    emu: Emulator, service: type[NineninesixTTSService | NineninesixHttpTTSService]
) -> None:
    """Credits run out on turn 1 (402: QUOTA, which Pipecat treats as recoverable); the account is topped up;
    turn 2 speaks on the same service. Turn 1 is attempted exactly once: no retry, no storm."""
    emu.config.credits = 0
    tts = service(
        emu.api_key,
        base_url=emu.base_url,
        settings=service.Settings(voice=TONE_VOICE_ID),
        **NO_IDLE_TIMEOUT,
    )
    gate, probe = Gate(), Probe()
    seen: list[tuple[int, list[str], int]] = []

    def top_up() -> None:
        codes = [code for _, code in emu.stats.errors_sent]
        seen.append((len(server_contexts(emu)), codes, emu.stats.http_requests))
        emu.config.credits = None

    task, topped_up = between_turns(probe.stopped, top_up)
    try:
        _, up = await run(pipeline(gate, tts, probe), [*turn(S1, S2, S3), topped_up, *turn(NEXT)], rate=24000)
    finally:
        task.cancel()

    errors = [e for e in errors_of(up) if e.processor is tts]
    assert [e.category for e in errors] == [ErrorCategory.QUOTA], [e.error for e in errors]
    assert tts.is_usable
    ((contexts_seen, codes, http_requests),) = seen
    if service is NineninesixTTSService:
        assert (contexts_seen, codes) == (1, ["insufficient_credits"])  # one context, one refusal
        assert emu.stats.ws_connections == 2  # the server closed the first socket; turn 2 reconnected
    else:
        assert (http_requests, codes) == (1, ["insufficient_credits"])  # one request, not one per sentence
    first, second = stopped_contexts(probe.frames)
    assert not audio_of(probe.frames, first)
    assert len(audio_of(probe.frames, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)


def stopped_contexts(frames: list) -> list[str]:
    return list(dict.fromkeys(f.context_id for f in frames if isinstance(f, TTSStoppedFrame)))


async def test_kitta_quota_exceeded_fails_one_turn_once_and_the_next_turn_speaks(emu: Emulator) -> None:
    """Kitta's quota error (``quota_exceeded``: the session's billable units) is QUOTA, not permanent: the
    turn that hit it ends, the limit is raised, and the next turn (a new session) speaks."""
    kitta = emu.config.kitta
    kitta.max_session_units = 10  # less than any sentence of turn 1
    tts = KittaTTSService(
        kitta.a_valid_key(),
        base_url=emu.base_url,
        settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
        provider_options={"backoff_initial": 0.01, "backoff_max": 0.05, "event_timeout": 5.0},
        **NO_IDLE_TIMEOUT,
    )
    gate, probe = Gate(), Probe()
    seen: list[list[str]] = []

    def raise_limit() -> None:
        seen.append(list(emu.stats.kitta_errors))
        kitta.max_session_units = 100_000

    task, raised = between_turns(probe.stopped, raise_limit)
    try:
        _, up = await run(pipeline(gate, tts, probe), [*turn(S1, S2, S3), raised, *turn(NEXT)], rate=24000)
    finally:
        task.cancel()

    errors = [e for e in errors_of(up) if e.processor is tts]
    assert [e.category for e in errors] == [ErrorCategory.QUOTA], [e.error for e in errors]
    assert tts.is_usable
    assert seen == [["quota_exceeded"]]  # turn 1 was refused once and not retried
    first, second = stopped_contexts(probe.frames)
    assert not audio_of(probe.frames, first)
    assert len(audio_of(probe.frames, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.05)
    assert [t.strip() for t in emu.stats.kitta_segment_texts] == [NEXT]


async def test_error_after_some_audio_keeps_only_heard_words(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="warehouse", action="error", error_code="generation_failed", after_chunks=3))
    tts = make_tts(emu, **NO_IDLE_TIMEOUT)
    down, up = await two_turns(tts, turn(S1, S2, S3), turn(NEXT))

    assert [e.category for e in our_errors(up)] == [ErrorCategory.SERVER]
    first, second = contexts(down)
    played = len(audio_of(down, first)) / 2 / 24000
    assert tone_len(S1) < played < tone_len(S1) + tone_len(S2)
    words = [f.text for f in down if isinstance(f, TTSTextFrame) and f.context_id == first]
    assert_heard_part_of(words[: len(S1.split())], S1)
    for word in S2.split()[2:] + S3.split():
        assert word not in words
    assert len(audio_of(down, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)


async def test_concurrent_limit_is_retried_on_a_fresh_context(emu: Emulator) -> None:
    # the server refuses the turn's first request (before any audio: the turn can be replayed)
    emu.add_fault(Fault(trigger="Hello there", action="error", error_code="concurrent_limit"))
    tts = make_tts(emu, **NO_IDLE_TIMEOUT)
    down, up = await run(tts, turn(S1, S2), rate=24000)

    assert not our_errors(up)
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1) + tone_len(S2), abs=0.03)
    server_contexts = {m["context_id"] for _, m in emu.stats.messages if "context_id" in m}
    assert len(server_contexts) == 2
    assert emu.stats.ws_connections == 1


async def test_concurrent_limit_that_never_clears_fails_the_turn_only(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1[:10], action="error", error_code="concurrent_limit", times=0))
    tts = make_tts(
        emu, provider_options={"concurrent_limit_retries": 1, "retry_backoff": 0.01}, **NO_IDLE_TIMEOUT
    )
    down, up = await two_turns(tts, [TTSSpeakFrame(S1)], [TTSSpeakFrame(NEXT)])

    assert [e.category for e in our_errors(up)] == [ErrorCategory.RATE_LIMIT]
    assert tts.is_usable
    (only,) = contexts(down)
    assert len(audio_of(down, only)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)


async def test_socket_dropped_mid_turn_ends_it_and_the_next_turn_reconnects(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="warehouse", action="drop", after_chunks=2))
    tts = make_tts(emu, **NO_IDLE_TIMEOUT)
    down, up = await two_turns(tts, turn(S1, S2, S3), turn(NEXT))

    errors = our_errors(up)
    assert [e.category for e in errors] == [ErrorCategory.CONNECTIVITY]
    assert tts.is_usable
    first, second = contexts(down)
    assert any(isinstance(f, TTSStoppedFrame) and f.context_id == first for f in down)
    words = [f.text for f in down if isinstance(f, TTSTextFrame) and f.context_id == first]
    assert not set(S3.split()) & set(words)
    assert len(audio_of(down, second)) / 2 / 24000 == pytest.approx(tone_len(NEXT), abs=0.02)
    assert emu.stats.ws_connections == 2


async def test_stalled_server_times_out_the_turn(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger="warehouse", action="stall", after_chunks=1))
    tts = make_tts(emu, provider_options={"receive_timeout": 0.5}, **NO_IDLE_TIMEOUT)
    down, up = await two_turns(tts, turn(S2), turn(NEXT))

    errors = our_errors(up)
    assert [e.category for e in errors] == [ErrorCategory.CONNECTIVITY]
    assert "no audio" in errors[0].error
    assert len(contexts(down)) == 2
    assert emu.stats.ws_connections == 1


@pytest.fixture
def captured_logs(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """Everything loguru (Pipecat's logger) and stdlib logging (ttsbridge, websockets) write, at every level."""
    lines: list[str] = []
    handler = logger.add(lambda message: lines.append(str(message)), level="TRACE", backtrace=True)
    caplog.set_level(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.remove(handler)
        lines.extend(r.getMessage() for r in caplog.records)
        lines.append(caplog.text)


async def test_bad_key_is_fatal_and_never_logged(captured_logs: list[str]) -> None:
    good, bad = "sk_996_the_good_key_1234", "sk_996_wrong_key_do_not_leak_5678"
    async with Emulator(EmulatorConfig(api_keys={good}, default_voice="tone")) as emu:
        tts = make_tts(emu, api_key=bad, **NO_IDLE_TIMEOUT)
        down, up = await run(tts, turn(S1), rate=24000)

    errors = our_errors(up)
    assert errors and errors[0].category is ErrorCategory.AUTHENTICATION
    assert not tts.is_usable
    assert not audio_of(down)
    assert emu.stats.ws_rejected >= 1
    texts = [*captured_logs, *(e.error for e in errors_of(up)), *(repr(e.exception) for e in errors_of(up))]
    assert captured_logs
    assert not [t for t in texts if bad in t]
    assert not [t for t in texts if "wrong_key" in t]


async def test_api_key_absent_from_logs_through_failures(emu: Emulator, captured_logs: list[str]) -> None:
    key = emu.api_key
    emu.add_fault(Fault(trigger="warehouse", action="error", error_code="generation_failed"))
    emu.add_fault(Fault(trigger="Friday", action="drop", after_chunks=1))
    tts = make_tts(emu, **NO_IDLE_TIMEOUT)
    _, up = await two_turns(tts, turn(S2), turn(S3))

    assert len(our_errors(up)) == 2
    assert any("api_key" in line or "nineninesix" in line for line in captured_logs)
    texts = [*captured_logs, *(e.error for e in errors_of(up)), repr(tts.provider)]
    assert not [t for t in texts if key in t]
    assert "sk_996_" not in repr(tts.provider).replace("sk_996_…", "")
    assert sys.modules["ttsbridge.pipecat"]  # imported without touching the key
