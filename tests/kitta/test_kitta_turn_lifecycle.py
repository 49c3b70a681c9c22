"""Review of the Kitta provider layer: timeouts, cancel races, early exits, closes and key leaks.

Every test talks to the emulator over loopback; the package conftest fails a test that leaks client tasks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from kitta_support import live, session_ready

from support import wait_until as poll
from ttsbridge.emulator import Emulator
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.errors import TTSConnectionError
from ttsbridge.kitta import KittaTurnProvider

WAIT = 5.0
MakeProvider = Callable[..., KittaTurnProvider]


async def collect(turn: Any, timeout: float = WAIT) -> bytes:
    async def run() -> bytes:
        return b"".join([c async for c in turn])

    return await asyncio.wait_for(run(), timeout)


# --- timeouts ----------------------------------------------------------------------------------------------


async def test_text_sent_late_in_a_wait_gets_the_full_event_timeout(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    # The server answers 0.5 s after a flush; the text comes 0.7 s into the consumer's wait (a slow LLM).
    # event_timeout (1 s) counts from the text, so nothing is late: audio arrives 1.2 s into the wait.
    kemu.config.kitta.first_chunk_latency_s = 0.5
    provider = make_provider(standby=False, event_timeout=1.0)
    turn = await provider.open_turn(sample_rate=24000)
    consumer = asyncio.ensure_future(collect(turn))
    await session_ready(turn.link)
    await asyncio.sleep(0.7)  # the LLM is slow: this is the scenario, not a synchronisation
    await turn.send("Late but fine. ")
    await turn.end()
    assert await consumer


# --- cancel races ------------------------------------------------------------------------------------------


async def test_aclose_during_a_retry_backoff_fails_the_turn_at_once(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.session_faults = ["error=internal_error:retryable"]
    # a backoff of 5-10 s: the turn sits in it when the provider is closed
    provider = make_provider(standby=False, backoff_initial=10.0, backoff_max=10.0)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Try again later. ")
    await turn.end()
    consumer = asyncio.ensure_future(collect(turn))
    await poll(lambda: turn.retries == 1)
    await asyncio.wait_for(provider.aclose(), 2.0)
    with pytest.raises(TTSConnectionError):
        await asyncio.wait_for(consumer, 1.0)
    assert turn.done
    assert kemu.stats.kitta_sessions == 1  # no session was started after the close


async def test_cancel_during_a_retry_backoff_ends_the_iterator_at_once(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.session_faults = ["error=internal_error:retryable"]
    provider = make_provider(standby=False, backoff_initial=10.0, backoff_max=10.0)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Try again later. ")
    await turn.end()
    consumer = asyncio.ensure_future(collect(turn))
    await poll(lambda: turn.retries == 1)
    await asyncio.wait_for(turn.cancel(), 1.0)
    assert await asyncio.wait_for(consumer, 1.0) == b""
    assert turn.done and kemu.stats.kitta_sessions == 1


async def test_concurrent_cancels_and_a_racing_send_are_quiet(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.realtime_factor = 2.0
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("A sentence long enough to still be speaking when it is cut short. ")
    it = turn.__aiter__()
    await asyncio.wait_for(it.__anext__(), WAIT)
    await asyncio.wait_for(
        asyncio.gather(turn.cancel(), turn.send("More. "), turn.cancel(), turn.end()), WAIT
    )
    assert [c async for c in it] == []
    assert turn.done
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes == 1, timeout=WAIT)
    assert "More." not in kemu.stats.kitta_segment_texts


async def test_cancel_before_the_session_is_ready(kemu: Emulator, make_provider: MakeProvider) -> None:
    kemu.config.kitta.handshake_delay_s = 2.0  # still handshaking when cancelled
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Never sent. ")
    await asyncio.wait_for(turn.cancel(), 1.5)
    assert await collect(turn, 1.0) == b""
    assert turn.done
    assert not live(provider)


async def test_cancel_after_the_connection_dropped_ends_the_iterator_quietly(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("Waiting for more. ")  # not ended
    await session_ready(turn.link)
    await kemu.drop_connections()
    await poll(lambda: turn.link.finished)
    await asyncio.wait_for(turn.cancel(), 1.0)
    assert await collect(turn, 1.0) == b""  # no error: the caller cancelled the turn
    assert turn.done


# --- early exit ---------------------------------------------------------------------------------------------


async def test_breaking_out_of_the_iterator_closes_the_session(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.realtime_factor = 2.0  # paced: the turn is mid-audio when the consumer leaves
    provider = make_provider(standby=False)
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send("A sentence long enough to still be speaking when the consumer leaves. ")  # not ended
    async for _ in turn:
        break
    await kemu.wait_until(lambda: kemu.stats.kitta_client_closes == 1, timeout=WAIT)
    await poll(lambda: turn.done and not live(provider))
    kemu.config.kitta.realtime_factor = 0.0
    turn2 = await provider.open_turn(sample_rate=24000)
    await turn2.send("Next. ")
    await turn2.end()
    assert await collect(turn2)


# --- close -------------------------------------------------------------------------------------------------


async def test_aclose_closes_the_standby_and_every_session(
    kemu: Emulator, make_provider: MakeProvider
) -> None:
    kemu.config.kitta.realtime_factor = 1.0
    provider = make_provider()
    await provider.prewarm()
    turn = await provider.open_turn(sample_rate=24000)
    assert turn.connection_reused
    await turn.send("Speaking while the provider closes. ")
    consumer = asyncio.ensure_future(collect(turn))
    await poll(lambda: turn.audio_started)
    await poll(lambda: provider.dialer.standby is not None)  # the replacement is on its way
    await asyncio.wait_for(provider.aclose(), 3.0)
    with pytest.raises(TTSConnectionError):
        await asyncio.wait_for(consumer, 1.0)
    assert not live(provider)
    await kemu.wait_until(lambda: kemu.stats.kitta_open == 0, timeout=WAIT)
    assert kemu.stats.kitta_sessions == 1  # the turn's; the standby connection never started one


# --- keys --------------------------------------------------------------------------------------------------


async def test_frame_auth_key_not_in_debug_frame_logs(
    kemu: Emulator, make_provider: MakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "Zq8vXw3Lp0Rt7Yk2Mn4b"
    provider = make_provider(api_key="kitta_" + secret, auth="frame", standby=False)
    turn: EngineTurn = await provider.open_turn(sample_rate=24000)
    await turn.send("Frame auth. ")
    await turn.end()
    assert await collect(turn)
    await provider.aclose()
    assert "> BINARY" in caplog.text, "the websockets frame log was not captured"
    raw = secret.encode()
    # neither the key nor any 4-byte piece of it, in text or in websockets' hex dump of binary frames
    for i in range(len(raw) - 3):
        piece = raw[i : i + 4]
        assert piece.decode() not in caplog.text
        assert piece.hex(" ") not in caplog.text


def test_server_text_echoing_the_key_is_masked(tone_options: Any) -> None:
    """A server may quote the key it was given; a Kitta key has no pattern a generic mask would know."""
    import json

    import msgpack

    from ttsbridge.kitta.protocol import KittaProtocol

    key = "kitta_EchoedSecret0123456789"
    body = json.dumps({"error": "unauthorized", "message": f"unknown key {key}"}).encode()
    handshake = KittaProtocol(request=tone_options.start_request(), secrets=(key,))
    err = handshake.handshake_rejected(401, {}, body)
    assert err.status_code == 401 and err.error_code == "unauthorized"
    assert key not in str(err) and key not in repr(err)

    proto = KittaProtocol(request=tone_options.start_request(), secrets=(key,))
    proto.open_turn("r1", None, 0.0)
    event = {"event": "error", "code": "unauthorized", "message": f"bad token {key}", "retryable": False}
    proto.receive(msgpack.packb(event), 0.0)
    assert proto.error is not None and key not in str(proto.error)

    proto = KittaProtocol(request=tone_options.start_request(), secrets=(key,))
    proto.open_turn("r2", None, 0.0)
    proto.connection_lost(1008, f"policy: {key}", 0.0)
    closed = proto.error
    assert closed is not None and key not in str(closed)


async def test_the_provider_masks_its_key_in_server_texts(
    make_provider: MakeProvider, kitta_key: str
) -> None:
    provider = make_provider(standby=False)
    proto = provider.endpoint.protocol(provider.options.start_request(), "r3")
    assert proto.secrets == (kitta_key,)
    assert kitta_key not in repr(proto)


async def test_a_session_closed_before_it_started_ends_at_once(make_provider: MakeProvider) -> None:
    provider = make_provider(connect_timeout=10.0, event_timeout=10.0, standby=False)
    session, _ = await provider.dialer.dial("r-early", None, retry=True)
    await asyncio.wait_for(session.close(), 2.0)  # its connect has not run yet
    assert session.finished and not live(provider)
    with pytest.raises(TTSConnectionError):
        await asyncio.wait_for(session.wait_open(), 1.0)  # at once, not after its 10 s timeout
    gen = await provider.open_turn(sample_rate=24000)
    await gen.link.close()  # type: ignore[union-attr]
    assert await asyncio.wait_for(collect(gen), 1.0) == b""
    assert not live(provider)


def test_a_segment_whose_audio_is_held_for_a_gap_is_never_replayed(tone_options: Any) -> None:
    import msgpack

    from ttsbridge.kitta.protocol import KittaProtocol, SegmentStatus

    def srv(**obj: Any) -> bytes:
        return msgpack.packb(obj, use_bin_type=True)

    p = KittaProtocol(request=tone_options.start_request())
    p.open_turn("r1", None, 0.0)
    p.data_to_send()
    p.receive(srv(event="authenticated"), 0.0)
    p.data_to_send()
    p.receive(srv(event="ready", request_id="r1", sample_rate=24000, channels=1, bit_depth=16), 0.0)
    p.send_text("r1", "Hello there. ", 0.0)
    p.flush("r1", 0.0)
    p.data_to_send()
    frame = {
        "event": "audio",
        "request_id": "r1",
        "audio": b"\x01\x00" * 8,
        "sample_rate": 24000,
        "channels": 1,
        "bit_depth": 16,
    }
    p.receive(srv(**frame, seq=1), 0.0)
    assert p.events_received() == []  # held: seq 0 has not arrived
    # the server sent (and billed) audio of the segment: a retryable close must not replay it
    p.connection_lost(1013, "try again later", 0.0)
    err = p.error
    assert err is not None and err.retryable
    assert p.segments[0].status is SegmentStatus.DELIVERING
    assert p.plan is None  # no retry: its TurnFailed carries none


async def test_error_from_a_server_that_never_closes_is_reported_at_once(
    make_emulator: Callable[..., Any],
) -> None:
    from ttsbridge.emulator.kitta import KittaConfig
    from ttsbridge.errors import TTSAPIError
    from ttsbridge.kitta.models import KittaOptions

    emu = await make_emulator(kitta=KittaConfig(close_after_error=False))
    provider = KittaTurnProvider(
        emu.config.kitta.a_valid_key(),
        base_url=emu.base_url,
        options=KittaOptions(voice_id="tone"),
        standby=False,
        event_timeout=30.0,
    )
    try:
        turn = await provider.open_turn(sample_rate=16000)
        await turn.send("Hello. [[kitta:error=invalid_parameter]]")
        await turn.end()

        async def drain() -> None:
            async for _ in turn:
                pass

        # bounded well below event_timeout: the error must arrive with its event, not with a timeout
        with pytest.raises(TTSAPIError) as info:
            await asyncio.wait_for(drain(), 10)
    finally:
        await provider.aclose()
    assert info.value.error_code == "invalid_parameter"
