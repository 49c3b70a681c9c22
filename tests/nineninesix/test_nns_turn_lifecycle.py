"""Review of the Nineninesix provider layer: races in cancel, early exits, closes, timeouts and key leaks.

Every test talks to the emulator over loopback. A few reach into the client's state (the connection's
contexts, the turn's lock) to check that nothing is left behind, or to hold a race open deterministically.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from support import wait_until as poll
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSConnectionError, TTSTimeoutError
from ttsbridge.nineninesix import (
    ContextState,
    NineninesixOptions,
    NineninesixTurnProvider,
    OutputFormat,
)

S1, S2, S3 = "Hello there.", "How can I help you today?", "Let me check that for you."
WAIT = 5.0


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as e:
        yield e


def bare_provider(emu: Emulator) -> NineninesixTurnProvider:
    """A provider whose turns are never retried and whose cancel waits for the server's answer."""
    opts = NineninesixOptions(voice=TONE_VOICE_ID)
    return NineninesixTurnProvider(
        emu.api_key, base_url=emu.base_url, options=opts, concurrent_limit_retries=0, wait_for_cancel_ack=True
    )


def make_provider(emu: Emulator, **kw: Any) -> NineninesixTurnProvider:
    opts = kw.pop("options", None) or NineninesixOptions(voice=TONE_VOICE_ID)
    return NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts, **kw)


async def collect(it: Any, timeout: float = WAIT) -> bytes:
    async def run() -> bytes:
        out = bytearray()
        async for pcm in it:
            out += pcm
        return bytes(out)

    return await asyncio.wait_for(run(), timeout)


def cancels_of(emu: Emulator) -> list[str]:
    return [m["context_id"] for _, m in emu.stats.messages if m.get("cancel")]


def transcripts_of(emu: Emulator, context_id: str) -> list[str]:
    return [
        m["transcript"]
        for _, m in emu.stats.messages
        if m.get("context_id") == context_id and "transcript" in m
    ]


def live_tasks() -> list[asyncio.Task[Any]]:
    out = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        name = task.get_name()
        code = getattr(task.get_coro(), "cr_code", None)
        if name.startswith("nineninesix-") or (code is not None and "/websockets/" in code.co_filename):
            out.append(task)
    return out


async def no_client_tasks_left() -> None:
    for _ in range(5):
        await asyncio.sleep(0)  # let already-cancelled tasks unwind
    assert live_tasks() == []


# --- cancel races ------------------------------------------------------------------------------------------


async def test_cancel_during_concurrent_limit_backoff_ends_the_iterator_at_once(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=0))
    # A long backoff: the turn sits in it when cancelled (2.5 s to 7.5 s, longer than any bound below).
    provider = make_provider(emu, retry_backoff=5.0)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)
        await turn.end()
        it = turn.__aiter__()
        nxt = asyncio.ensure_future(it.__anext__())
        await poll(lambda: turn.retries == 1)
        await asyncio.wait_for(turn.cancel(), 1.0)
        with pytest.raises(StopAsyncIteration):
            await asyncio.wait_for(nxt, 1.0)
        assert turn.done
        # no fresh context was opened for a cancelled turn
        ids = {m.get("context_id") for _, m in emu.stats.messages}
        assert len(ids) == 1
    finally:
        await provider.aclose()


async def test_cancel_while_the_retry_opens_its_fresh_context_cancels_that_context(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=1))
    provider = make_provider(emu, retry_backoff=0.01)
    turn = await provider.open_turn(sample_rate=16000)
    first_id = turn.id
    client = provider.dialer
    dial = client.dial
    cancelled: list[bool] = []

    async def dial_racing_cancel(*args: Any, **kw: Any) -> Any:
        # The barge-in lands while the retry is opening its fresh context (e.g. reconnecting).
        if kw.get("retry"):
            await asyncio.wait_for(turn.cancel(), WAIT)
            cancelled.append(True)
        return await dial(*args, **kw)

    client.dial = dial_racing_cancel  # type: ignore[method-assign]
    try:
        await turn.send(S1)
        await turn.end()
        assert await collect(turn) == b""
        assert cancelled == [True]
        fresh = [cid for cid in {m.get("context_id") for _, m in emu.stats.messages} if cid != first_id]
        # Either nothing of the turn was replayed on a fresh context, or that context was cancelled too.
        for cid in fresh:
            assert transcripts_of(emu, cid) == [] or cid in cancels_of(emu)
        conn = client.connection(OutputFormat(sample_rate=16000))
        assert conn is not None
        await poll(lambda: not conn.sinks and not conn.protocol.contexts)
    finally:
        await provider.aclose()


async def test_two_concurrent_cancels_both_wait_for_the_ack_and_leave_nothing_behind(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0  # paced: the context is mid-audio when cancelled
    provider = bare_provider(emu)
    client = provider.dialer
    try:
        ctx = await provider.open_turn(sample_rate=16000)
        await ctx.send(S2)
        await ctx.end()
        it = ctx.__aiter__()
        await asyncio.wait_for(it.__anext__(), WAIT)
        states: list[ContextState] = []

        async def cancel() -> None:
            await ctx.cancel()
            states.append(ctx.facts.state)

        await asyncio.wait_for(asyncio.gather(cancel(), cancel()), WAIT)
        # both returned once the server confirmed the cancel
        assert states == [ContextState.CANCELLED, ContextState.CANCELLED]
        assert [c async for c in it] == []
        assert cancels_of(emu) == [ctx.id]  # exactly one cancel on the wire
        conn = client.connection(OutputFormat(sample_rate=16000))
        assert conn is not None and not conn.sinks and not conn.protocol.contexts
    finally:
        await provider.aclose()


async def test_cancel_before_any_text_does_not_wait_for_the_timeout(emu: Emulator) -> None:
    # cancel_timeout far above the bound: only a prompt answer (or none needed) passes
    provider = make_provider(emu, cancel_timeout=30.0)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await asyncio.wait_for(turn.cancel(), 2.0)
        assert turn.done
        assert await collect(turn, 1.0) == b""
        ctx = turn
        assert ctx is not None
        conn = provider.dialer.connection(OutputFormat(sample_rate=16000))
        assert conn is not None and not conn.sinks and ctx.id not in conn.protocol.contexts
        # the socket is fine for the next turn
        turn2 = await provider.open_turn(sample_rate=16000)
        await turn2.send(S1)
        await turn2.end()
        assert await collect(turn2)
        assert emu.stats.ws_connections == 1
    finally:
        await provider.aclose()


async def test_send_that_raced_a_cancel_does_not_raise(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)
        # Another send holds the turn (e.g. writing to a busy socket); this one waits behind it.
        await turn._lock.acquire()
        racing = asyncio.ensure_future(turn.send(S2))
        ending = asyncio.ensure_future(turn.end())
        await asyncio.sleep(0)  # both are past their checks, waiting for the lock
        await asyncio.wait_for(turn.cancel(), WAIT)
        turn._lock.release()
        # a send/end that was already under way when the turn was cancelled is dropped, not an error
        await asyncio.wait_for(asyncio.gather(racing, ending), WAIT)
        assert S2 not in transcripts_of(emu, turn.id)
        assert await collect(turn, 1.0) == b""
    finally:
        await provider.aclose()


async def test_cancel_after_the_connection_dropped_ends_the_iterator_quietly(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S1)  # not ended: waits for more text
        ctx = turn
        assert ctx is not None
        await emu.drop_connections()
        await poll(lambda: ctx.settled)
        await asyncio.wait_for(turn.cancel(), 1.0)
        # the caller cancelled the turn: its iterator stops, without an error nobody asked for
        assert await collect(turn, 1.0) == b""
        assert turn.done
    finally:
        await provider.aclose()


# --- early exit ---------------------------------------------------------------------------------------------


async def test_breaking_out_of_the_iterator_cancels_the_context(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0  # paced: the turn is mid-audio when the consumer leaves
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(S2 + " " + S3)  # not ended: without a cancel the context would stay open
        async for _ in turn:
            break
        await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, WAIT)
        assert cancels_of(emu) == [turn.id]
        await poll(lambda: turn.done)
        conn = provider.dialer.connection(OutputFormat(sample_rate=16000))
        assert conn is not None
        await poll(lambda: not conn.sinks and not conn.protocol.contexts)
        emu.config.realtime_factor = 0.0
        turn2 = await provider.open_turn(sample_rate=16000)
        await turn2.send(S1)
        await turn2.end()
        assert await collect(turn2)
        assert emu.stats.ws_connections == 1
    finally:
        await provider.aclose()
    await no_client_tasks_left()


async def test_breaking_out_of_a_context_iterator_cancels_it(emu: Emulator) -> None:
    emu.config.realtime_factor = 2.0
    provider = bare_provider(emu)
    client = provider.dialer
    try:
        ctx = await provider.open_turn(sample_rate=16000)
        await ctx.send(S2)
        async for _ in ctx:
            break
        await emu.wait_until(lambda: emu.stats.contexts_cancelled == 1, WAIT)
        await poll(lambda: ctx.settled)
        conn = client.connection(OutputFormat(sample_rate=16000))
        assert conn is not None
        await poll(lambda: not conn.sinks and not conn.protocol.contexts)
    finally:
        await provider.aclose()
    await no_client_tasks_left()


# --- timeouts ----------------------------------------------------------------------------------------------


async def test_text_sent_late_in_a_wait_gets_the_full_receive_timeout(emu: Emulator) -> None:
    # The server answers 0.5 s after the text; the text comes 0.7 s into the consumer's wait (a slow LLM).
    # The receive timeout (1 s) counts from the text, so nothing is late: audio arrives 1.2 s into the wait.
    emu.config.first_chunk_latency_s = 0.5
    provider = make_provider(emu, receive_timeout=1.0)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        consumer = asyncio.ensure_future(collect(turn, WAIT))
        await asyncio.sleep(0.7)  # the LLM is slow: this is the scenario, not a synchronisation
        await turn.send(S1)
        await turn.end()
        assert await consumer
    finally:
        await provider.aclose()


async def test_a_stalled_context_that_times_out_is_cancelled_on_the_server(emu: Emulator) -> None:
    provider = make_provider(emu, receive_timeout=0.3)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("[[stall]] " + S1)
        await turn.end()
        with pytest.raises(TTSTimeoutError):
            await collect(turn)
        assert cancels_of(emu) == [turn.id]
        conn = provider.dialer.connection(OutputFormat(sample_rate=16000))
        assert conn is not None
        await poll(lambda: not conn.sinks and not conn.protocol.contexts)
    finally:
        await provider.aclose()


# --- close -------------------------------------------------------------------------------------------------


async def test_aclose_during_a_retry_backoff_fails_the_turn_at_once_and_opens_nothing(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=0))
    provider = make_provider(emu, retry_backoff=5.0)
    turn = await provider.open_turn(sample_rate=16000)
    await turn.send(S1)
    await turn.end()
    consumer = asyncio.ensure_future(collect(turn, WAIT))
    await poll(lambda: turn.retries == 1)
    await asyncio.wait_for(provider.aclose(), 2.0)
    with pytest.raises(TTSConnectionError):
        await asyncio.wait_for(consumer, 1.0)
    assert turn.done
    assert emu.stats.ws_connections == 1
    await no_client_tasks_left()


async def test_aclose_fails_every_open_turn_promptly(emu: Emulator) -> None:
    emu.config.realtime_factor = 1.0
    provider = make_provider(emu)
    turns: list[EngineTurn] = []
    for text in (S1, S2):
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send(text)
        turns.append(turn)
    await turns[1].end()
    consumers = [asyncio.ensure_future(collect(t, WAIT)) for t in turns]
    await poll(lambda: emu.stats.chunks_sent > 0)
    await asyncio.wait_for(provider.aclose(), 2.0)
    for c in consumers:
        with pytest.raises(TTSConnectionError):
            await asyncio.wait_for(c, 1.0)
    await no_client_tasks_left()


# --- keys --------------------------------------------------------------------------------------------------


async def test_error_frame_echoing_the_key_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    from ttsbridge.nineninesix.models import ErrorMessage
    from ttsbridge.nineninesix.protocol import api_error

    key = "sk_996_echoed_secret_0123456789"
    msg = ErrorMessage(
        error_code="not_initialized",
        status_code=503,
        title=f"upstream said wss://x/tts/websocket?api_key={key}",
        message=f"bad key {key}",
    )
    err = api_error(msg)
    assert key not in str(err) and key not in repr(err)


async def test_key_never_logged_at_debug_by_any_library(
    emu: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    key = emu.api_key
    provider = make_provider(emu, receive_timeout=0.3)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("[[stall]] " + S1)
        await turn.end()
        with pytest.raises(TTSTimeoutError) as info:
            await collect(turn)
        assert key not in str(info.value)
        turn = await provider.open_turn(sample_rate=16000, voice="no-such-voice")
        await turn.send(S1)
        await turn.end()
        with pytest.raises(Exception) as info2:
            await collect(turn)
        assert key not in str(info2.value) and key not in repr(info2.value)
        assert key not in repr(provider) and key not in repr(turn) and key not in repr(provider.dialer.pool)
    finally:
        await provider.aclose()
    assert caplog.records
    assert key not in caplog.text
    for rec in caplog.records:
        assert key not in rec.getMessage()


# --- HTTP --------------------------------------------------------------------------------------------------


async def test_sse_stream_cut_mid_way_is_a_typed_connection_error(emu: Emulator) -> None:
    provider = make_provider(emu)
    try:
        with pytest.raises(TTSConnectionError) as info:
            async for _ in provider.synthesize("[[drop:2]] " + S2, sample_rate=16000):
                pass
        assert emu.api_key not in str(info.value)
        with pytest.raises(TTSConnectionError):
            await provider.http.tts_bytes("[[drop:2]] " + S2, voice=TONE_VOICE_ID)
    finally:
        await provider.aclose()


async def test_sse_stream_that_stalls_is_a_typed_timeout(emu: Emulator) -> None:
    provider = make_provider(emu)
    provider.http.timeout = 0.3
    try:
        with pytest.raises(TTSTimeoutError):
            await asyncio.wait_for(collect(provider.synthesize("[[stall]] " + S1, sample_rate=16000)), WAIT)
    finally:
        await provider.aclose()


# --- connection-closing errors -----------------------------------------------------------------------------


async def test_an_error_read_as_socket_closing_closes_our_side_too(emu: Emulator) -> None:
    # An error code outside the catalog is read as closing the socket (every context on it fails, the next
    # turn reconnects). If the server keeps the socket open, the client must not leave it open, unpooled,
    # with its reader running, where aclose() can no longer reach it.
    emu.add_fault(Fault(trigger="Doomed", action="error", error_code="invalid_request"))
    provider = make_provider(emu)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("Doomed.")
        await turn.end()
        with pytest.raises(Exception) as info:
            await collect(turn)
        assert getattr(info.value, "error_code", None) == "invalid_request"
        await emu.wait_until(lambda: emu.stats.ws_open == 0, WAIT)
        turn2 = await provider.open_turn(sample_rate=16000)
        await turn2.send(S1)
        await turn2.end()
        assert await collect(turn2)
    finally:
        await provider.aclose()
    await no_client_tasks_left()


async def test_a_turn_whose_idle_socket_closed_before_its_first_text_reopens(emu: Emulator) -> None:
    # The server closes the pooled socket as idle right after the turn opened on it (the server has not
    # heard of the turn's context yet, so the socket is idle for it). Nothing of the turn reached the
    # server: it goes on on a fresh connection instead of failing.
    provider = make_provider(emu, retry_backoff=0.01)
    try:
        emu.config.idle_timeout_s = 0.5
        await provider.prewarm(sample_rate=16000)
        turn = await provider.open_turn(sample_rate=16000)  # on the pooled socket, opened just now
        assert emu.stats.ws_connections == 1
        ctx = turn
        assert ctx is not None
        await emu.wait_until(lambda: emu.stats.ws_open == 0, WAIT)
        await poll(lambda: ctx.facts.state.terminal)
        emu.config.idle_timeout_s = None
        await turn.send(S1)
        await turn.end()
        pcm = await collect(turn)
        assert pcm and turn.retries == 1
        assert emu.stats.ws_connections == 2
        assert transcripts_of(emu, turn.id) == [S1, ""]
    finally:
        await provider.aclose()


async def test_a_turn_whose_socket_dropped_after_its_text_was_sent_is_not_replayed(emu: Emulator) -> None:
    provider = make_provider(emu, retry_backoff=0.01)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        first = turn.id
        await turn.send(S1)  # the server may have heard of it: never replayed
        await emu.drop_connections()
        with pytest.raises(TTSConnectionError):
            await turn.end()
        with pytest.raises(TTSConnectionError):
            await collect(turn)
        assert turn.retries == 0 and turn.id == first
    finally:
        await provider.aclose()


# --- protocol ----------------------------------------------------------------------------------------------


def test_done_before_our_continue_false_ends_nothing() -> None:
    import base64
    import json

    from proto_driver import Driver

    from ttsbridge.engine import AudioReceived, TurnDone
    from ttsbridge.nineninesix import NineninesixProtocol

    def frame(**kw: Any) -> str:
        return json.dumps(kw)

    p = Driver(NineninesixProtocol(OutputFormat()))
    p.open("a")
    p.send("a", "First.")
    # a done before our continue: false (the spec sends none): the turn goes on, its later audio is kept
    assert p.rx(frame(type="done", context_id="a", done=True, status_code=200)) == []
    assert p.state("a") is ContextState.OPEN
    p.send("a", "Second.")
    pcm = b"\x01\x00\x02\x00"
    chunk = frame(
        type="chunk", context_id="a", done=False, status_code=206, data=base64.b64encode(pcm).decode()
    )
    assert p.rx(chunk) == [AudioReceived("a", pcm)]
    p.end("a")
    assert p.rx(frame(type="done", context_id="a", done=True, status_code=200)) == [TurnDone("a")]
    assert p.state("a") is ContextState.DONE


async def test_cancel_while_the_retry_replays_the_text_ends_the_iterator_quietly(emu: Emulator) -> None:
    emu.add_fault(Fault(trigger=S1, action="error", error_code="concurrent_limit", times=1))
    provider = make_provider(emu, retry_backoff=0.01)
    turn = await provider.open_turn(sample_rate=16000)
    client = provider.dialer
    dial = client.dial

    async def dial_then_cancel(*args: Any, **kw: Any) -> Any:
        link, reused = await dial(*args, **kw)
        if kw.get("retry"):
            # the barge-in lands once the fresh context exists, while the turn's text is being replayed on it
            flush = link.flush

            async def flush_racing_cancel(timeout: float | None = None) -> None:
                link.flush = flush
                await asyncio.wait_for(turn.cancel(), WAIT)
                await flush(timeout)

            link.flush = flush_racing_cancel
        return link, reused

    client.dial = dial_then_cancel  # type: ignore[method-assign]
    try:
        await turn.send(S1)
        await turn.send(S2)
        await turn.end()
        assert await collect(turn) == b""  # no error: the caller cancelled the turn
        assert turn.done
    finally:
        await provider.aclose()
