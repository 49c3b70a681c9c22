"""The warm standby is a *connection*, never a speculative *session* (issue 8.1), and a finished turn keeps
nothing (issue 9.5). Against the emulator, whose ``kitta_events`` record when each connect, start and error
happened on the server side."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

from kitta_support import live

from support import wait_until as poll
from ttsbridge.emulator import Emulator
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSAPIError
from ttsbridge.kitta import KittaTurnProvider

WAIT = 10.0
MakeProvider = Callable[..., KittaTurnProvider]


async def speak(provider: KittaTurnProvider, text: str, **overrides: Any) -> tuple[EngineTurn, bytes]:
    turn = await provider.open_turn(sample_rate=24000, **overrides)
    await turn.send(text)
    await turn.end()

    async def _all() -> bytes:
        return b"".join([c async for c in turn])

    return turn, await asyncio.wait_for(_all(), WAIT)


def times_of(emu: Emulator, kind: str) -> list[float]:
    return [t for t, k in emu.stats.kitta_events if k == kind]


async def test_an_idle_standby_starts_no_session_across_replacements(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider(standby_max_age=0.1)
    await provider.prewarm()
    # each replacement is a new connection; wait for several of them
    await kemu.wait_until(lambda: kemu.stats.kitta_connections >= 4, timeout=WAIT)
    assert provider.dialer.retired >= 3
    assert kemu.stats.kitta_sessions == 0 and kemu.stats.kitta_request_ids == []
    assert times_of(kemu, "start") == []


async def test_each_turn_is_one_user_intended_session_ended_by_finish(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider()
    await provider.prewarm()
    turns = []
    for i in range(3):
        before = len(kemu.stats.kitta_request_ids)
        turn, pcm = await speak(provider, f"Turn number {i}. ")
        assert pcm and turn.connection_reused
        assert kemu.stats.kitta_request_ids[before:] == [turn.id]  # exactly one start, for this turn
        uuid.UUID(turn.id)  # a fresh id made when the turn opened (no retry suffix, no placeholder)
        turns.append(turn)
        await provider.prewarm()  # the replacement connection is up: still no extra start
    assert kemu.stats.kitta_request_ids == [t.id for t in turns]
    assert len(set(kemu.stats.kitta_request_ids)) == 3
    assert kemu.stats.kitta_finished == 3  # every session ended with stop -> finish
    assert kemu.stats.kitta_sessions == 3 and kemu.stats.kitta_connections == 4


async def test_a_retry_on_the_next_turn_waits_its_backoff_although_a_connection_is_warm(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    # LiveKit's retry loop opens the next turn ~0.1 s after a retryable failure; the warm connection is
    # there, but its start waits the backoff: equal jitter never goes below backoff_initial / 2 = 0.2 s.
    kemu.config.kitta.session_faults = ["error=internal_error:retryable:at=start"]
    provider = make_provider(max_retries=0, backoff_initial=0.4, backoff_max=0.4)
    await provider.prewarm()
    first = await provider.open_turn(sample_rate=24000)
    await first.send("Fails at start. ")
    await first.end()
    try:
        await asyncio.wait_for(first.__aiter__().__anext__(), WAIT)
        raise AssertionError("the first turn should fail")
    except TTSAPIError as exc:
        assert exc.retryable
    await provider.prewarm()  # a warm connection is open before the retry
    turn, pcm = await speak(provider, "Second try. ")
    assert pcm and turn.connection_reused
    (failed_at,) = times_of(kemu, "error")
    starts = times_of(kemu, "start")
    assert len(starts) == 2 and starts[1] - failed_at >= 0.2, (starts, failed_at)


async def test_a_generation_retry_waits_its_backoff_from_the_failure_to_the_next_start(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider(standby=False, max_retries=1, backoff_initial=0.4, backoff_max=0.4)
    turn, pcm = await speak(provider, "Retried once. [[kitta:error=internal_error:retryable:times=1]]")
    assert pcm and turn.retries == 1
    (failed_at,) = times_of(kemu, "error")
    starts = times_of(kemu, "start")
    connects = times_of(kemu, "connect")
    assert len(starts) == 2 and starts[1] - failed_at >= 0.2, (starts, failed_at)
    assert len(connects) == 2 and connects[1] < starts[1]  # the retry's connection, opened in the backoff


async def test_finished_turns_keep_no_session_socket_or_buffer(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider()
    await provider.prewarm()
    turns = [(await speak(provider, f"Sentence {i}. "))[0] for i in range(4)]
    barged = await provider.open_turn(sample_rate=24000)  # a barge-in: cancelled before its end
    await barged.send("Interrupted sentence. ")
    await barged.cancel()
    failed = await provider.open_turn(sample_rate=24000, voice_id="no-such-voice")
    await failed.send("Fails. ")
    await failed.end()
    with contextlib.suppress(TTSAPIError):
        await asyncio.wait_for(failed.__aiter__().__anext__(), WAIT)
    assert failed.done and failed.error is not None
    turns += [barged, failed, (await speak(provider, "Last one. "))[0]]
    await provider.prewarm()
    standby = provider.dialer.standby
    assert not provider._turns  # nothing per turn is kept after it ends
    await poll(lambda: set(live(provider)) <= {standby}, WAIT)
    for turn in turns:
        session = turn.link
        assert session.finished and not turn._stream.pending()
    await kemu.wait_until(lambda: kemu.stats.kitta_open == 1, timeout=WAIT)  # the standby only
