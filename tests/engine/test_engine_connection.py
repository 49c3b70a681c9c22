"""The engine's connection loop over a real loopback server, driven by a toy TurnProtocol."""

from __future__ import annotations

import asyncio

import pytest
from engine_toy import KEY, ToyProtocol, ToyServer

from support import wait_until
from ttsbridge.engine import ConnectionFailed, ConnectRequest, Event, describe_close
from ttsbridge.engine.connection import Connection
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.stream import TurnStream
from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSTimeoutError


async def collect(stream: TurnStream) -> bytes:
    async def run() -> bytes:
        return b"".join([pcm async for pcm in stream])

    return await asyncio.wait_for(run(), 5.0)


async def open_conn(srv: ToyServer, **kw: float) -> tuple[Connection, list[Event]]:
    seen: list[Event] = []
    conn = Connection(ToyProtocol(srv.url, **kw), on_event=seen.append, name="toy-1")
    await conn.connect()
    return conn, seen


def start(conn: Connection, turn_id: str) -> TurnStream:
    stream = TurnStream()
    conn.protocol.open_turn(turn_id, None, conn.now())
    conn.attach(turn_id, stream)
    return stream


async def test_a_turn_round_trip_dispatches_audio_to_its_sink_and_detaches_at_its_end() -> None:
    async with ToyServer() as srv:
        conn, seen = await open_conn(srv)
        a, b = start(conn, "a"), start(conn, "b")
        for tid, text in (("a", "hello"), ("b", "other"), ("a", " world")):
            conn.protocol.send_text(tid, text, conn.now())
            await conn.flush()
        conn.protocol.end_turn("a", conn.now())
        await conn.flush()
        assert await collect(a) == b"hello world"
        assert "a" not in conn.sinks and "b" in conn.sinks
        assert b.pending() == 1 and seen == []
        await conn.close()
        assert isinstance(seen[-1], ConnectionFailed) and "closed by the client" in str(seen[-1].error)
        with pytest.raises(TTSConnectionError, match="closed by the client"):
            await collect(b)
        assert conn.closed and conn.socket is not None and conn.socket.lost.done()  # nothing left reading


async def test_the_deadline_timer_ticks_the_protocol_which_fails_the_turn_and_cancels_it() -> None:
    async with ToyServer(silent=True) as srv:
        conn, _ = await open_conn(srv, owed_timeout=0.05)
        a = start(conn, "a")
        conn.protocol.send_text("a", "hello", conn.now())
        await conn.flush()
        with pytest.raises(TTSTimeoutError, match="no audio for a"):
            await collect(a)

        await wait_until(lambda: {"turn": "a", "cancel": True} in srv.received, 5.0)  # tick()'s frame written
        await conn.close()


async def test_a_dropped_socket_fails_live_turns_then_the_connection() -> None:
    async with ToyServer(drop_after=1) as srv:
        conn, seen = await open_conn(srv)
        a = start(conn, "a")
        conn.protocol.send_text("a", "hello", conn.now())
        await conn.flush()
        with pytest.raises(TTSConnectionError, match="connection dropped"):
            await collect(a)
        assert isinstance(seen[-1], ConnectionFailed) and conn.closed
        with pytest.raises(TTSConnectionError):  # a later write says so, typed
            conn.protocol.send_text("a", "more", conn.now())
            await conn.flush()
        await conn.close()


async def test_a_rejected_handshake_is_the_protocols_typed_error_without_the_key() -> None:
    async with ToyServer(reject=401) as srv:
        conn = Connection(ToyProtocol(srv.url), name="toy-1")
        with pytest.raises(TTSAPIError) as info:
            await conn.connect()
        # the connection handed the protocol the status and body of the rejection
        assert info.value.status_code == 401 and "go away ***" in str(info.value)
        assert srv.urls == [f"/toy?key={KEY}"]  # the request carried the URL the protocol built


async def test_an_unreachable_host_is_a_connection_error_naming_the_url_without_the_key() -> None:
    async with ToyServer() as srv:
        url = srv.url
    conn = Connection(ToyProtocol(url), ConnectionSettings(connect_timeout=5.0), name="toy-1")
    with pytest.raises(TTSConnectionError, match="cannot connect to") as info:
        await conn.connect()
    assert KEY not in str(info.value)


async def test_events_of_turns_without_a_sink_go_to_the_connection_callback() -> None:
    async with ToyServer() as srv:
        conn, seen = await open_conn(srv)
        conn.protocol.open_turn("orphan", None, conn.now())
        conn.protocol.send_text("orphan", "x", conn.now())
        conn.protocol.end_turn("orphan", conn.now())
        await conn.flush()

        await wait_until(lambda: len(seen) >= 2, 5.0)
        assert [type(e).__name__ for e in seen] == ["AudioReceived", "TurnDone"]
        await conn.close()


def test_connect_request_repr_masks_its_secrets() -> None:
    req = ConnectRequest(
        "wss://h/x?api_key=abcd1234", headers=(("Authorization", "Bearer abcd1234"),), secrets=("abcd1234",)
    )
    assert "abcd1234" not in repr(req) and "abcd1234" not in req.safe_url


def test_describe_close() -> None:
    assert (
        describe_close(None, "connection dropped (no close frame)") == "connection dropped (no close frame)"
    )
    assert describe_close(1011, "boom") == "connection closed by the server (code 1011: boom)"
    assert describe_close(1000, "") == "connection closed by the server (code 1000)"
