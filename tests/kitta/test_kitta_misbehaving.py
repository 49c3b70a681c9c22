"""A Kitta server that breaks the protocol: fields of the wrong type (issue 9.3), and a server that keeps
sending after the frame the client rejected (issue 9.4). The shared loopback server (``tests/loopback``),
scripted, plays the server; the field table is checked on the pure decoder."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import msgpack
import pytest
from kitta_support import live
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from loopback import LoopbackServer, ignore_close, kitta_ready, send
from support import wait_until as poll
from ttsbridge.emulator import TONE_VOICE_ID
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.kitta.protocol import KittaProtocolError, decode

WAIT = 5.0
PCM = b"\x01\x00" * 480

Body = Callable[[ServerConnection, str], Awaitable[None]]


def pack(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def loopback(body: Body) -> LoopbackServer:
    """Authenticates, answers ``start`` with ``ready``, then runs ``body(ws, request_id)``; what the client
    sends next is read and ignored (the server answers a close frame unless ``body`` stops reading)."""

    async def script(ws: ServerConnection, msg: dict[str, Any]) -> None:
        if msg.get("event") == "start":
            await send(ws, kitta_ready(msg["request_id"]))
            await body(ws, msg["request_id"])

    return LoopbackServer("kitta", script=script)


@contextlib.asynccontextmanager
async def client_for(server: LoopbackServer, **kwargs: Any) -> AsyncIterator[KittaTurnProvider]:
    provider = KittaTurnProvider(
        "any-key",
        base_url=server.base_url,
        options=KittaOptions(voice_id=TONE_VOICE_ID),
        standby=False,
        max_retries=0,
        **kwargs,
    )
    try:
        yield provider
    finally:
        await asyncio.wait_for(provider.aclose(), WAIT)


async def run_generation(provider: KittaTurnProvider) -> list[bytes]:
    turn = await provider.open_turn(sample_rate=24000)
    got: list[bytes] = []
    try:
        await turn.send("Hello. ")
        await turn.end()

        async def consume() -> None:
            async for pcm in turn:
                got.append(pcm)

        await asyncio.wait_for(consume(), WAIT)
    finally:
        await turn.cancel()
    return got


# --------------------------------------------------------------------------------------- field types (9.3)


async def test_audio_sent_as_a_text_string_fails_the_session_with_a_protocol_error() -> None:
    async def script(ws: ServerConnection, rid: str) -> None:
        await send(ws, {"event": "audio", "request_id": rid, "seq": 0, "audio": "AAAAAAAAAAAAAAAA"})
        await send(ws, {"event": "audio", "request_id": rid, "seq": 1, "audio": PCM})
        await send(ws, {"event": "finish", "request_id": rid, "units": 6})

    async with loopback(script) as server, client_for(server) as client:
        got: list[bytes] = []
        with pytest.raises(KittaProtocolError, match=r"audio\.audio"):
            got = await run_generation(client)
        assert got == []  # the string was never played as PCM, and nothing after it either


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"event": "audio", "audio": "AAAA"}, "audio"),
        ({"event": "audio", "audio": PCM, "sample_rate": "24000"}, "sample_rate"),
        ({"event": "audio", "audio": PCM, "sample_rate": 24000.0}, "sample_rate"),
        ({"event": "audio", "audio": PCM, "sample_rate": True}, "sample_rate"),
        ({"event": "audio", "audio": PCM, "channels": "1"}, "channels"),
        ({"event": "audio", "audio": PCM, "bit_depth": 16.0}, "bit_depth"),
        ({"event": "audio", "audio": PCM, "seq": "3"}, "seq"),
        ({"event": "audio", "audio": PCM, "sequence": 2.0}, "sequence"),
        ({"event": "audio", "audio": PCM, "request_id": 7}, "request_id"),
        ({"event": "ready", "request_id": b"r-1"}, "request_id"),
        ({"event": "ready", "request_id": "r-1", "sample_rate": "24000"}, "sample_rate"),
        ({"event": "ready", "request_id": "r-1", "channels": 1.5}, "channels"),
        ({"event": "usage", "units": "12"}, "units"),
        ({"event": "finish", "units": 3.0}, "units"),
        ({"event": "error", "code": 500}, "code"),
        ({"event": "error", "code": "x", "message": 42}, "message"),
        ({"event": "error", "code": "x", "retryable": "true"}, "retryable"),
        ({"event": "error", "code": "x", "retryable": 1}, "retryable"),
        ({"event": "error", "code": "x", "request_id": 1}, "request_id"),
    ],
)
def test_a_field_of_the_wrong_type_is_a_protocol_error_naming_it(event: dict[str, Any], field: str) -> None:
    if event["event"] in ("audio", "ready"):  # the required pcm layout, unless the case is about one of it
        event = {"sample_rate": 24000, "channels": 1, "bit_depth": 16, **event}
    with pytest.raises(KittaProtocolError, match=rf"{event['event']}\.{field}"):
        decode(pack(event))


def test_fields_of_the_right_types_decode() -> None:
    layout = {"sample_rate": 24000, "channels": 1, "bit_depth": 16}
    audio = decode(pack({"event": "audio", "audio": PCM, **layout, "seq": 0, "request_id": "r"}))
    assert audio is not None and audio.audio == PCM  # type: ignore[union-attr]
    error = decode(pack({"event": "error", "code": "busy", "message": "m", "retryable": True}))
    assert error is not None and error.retryable is True  # type: ignore[union-attr]


# ------------------------------------------------------------------- a server that keeps sending (9.4)


async def test_a_protocol_error_fails_the_turn_at_once_while_the_server_keeps_sending() -> None:
    async def script(ws: ServerConnection, rid: str) -> None:
        ignore_close(ws)
        await ws.send(b"\xc1 not msgpack")  # 0xc1 is never valid MessagePack
        frame = pack({"event": "audio", "request_id": rid, "audio": b"\x00" * 4096})
        with contextlib.suppress(ConnectionClosed):
            while True:  # keeps sending and never answers the client's close
                await ws.send(frame)
                await asyncio.sleep(0.001)

    close_timeout = 6.0
    async with loopback(script) as server, client_for(server, close_timeout=close_timeout) as client:
        turn = await client.open_turn(sample_rate=24000)
        await turn.send("Hello. ")
        await turn.end()
        # bounded well below close_timeout: a turn that waits for the close handshake fails here
        with pytest.raises(KittaProtocolError, match="undecodable"):
            await asyncio.wait_for(anext(aiter(turn)), close_timeout / 2)
        assert turn.done and turn.error is not None
        # the close goes on in the background and is bounded: the transport is aborted after close_timeout
        await asyncio.wait_for(server.closed.wait(), close_timeout + 4)
        await poll(lambda: not live(client), close_timeout + 4)
        await turn.cancel()


async def test_a_protocol_error_closes_the_socket_with_1002() -> None:
    """RFC 6455: 1002 is the close code for a protocol error; the engine sends the code the protocol chose."""
    seen: list[ServerConnection] = []

    async def script(ws: ServerConnection, rid: str) -> None:
        seen.append(ws)
        await send(ws, {"event": "audio", "request_id": rid, "seq": 0, "audio": "not bytes"})

    async with loopback(script) as server, client_for(server) as client:
        with pytest.raises(KittaProtocolError):
            await run_generation(client)
        await poll(lambda: bool(seen) and seen[0].protocol.close_rcvd is not None, WAIT)
        assert seen[0].protocol.close_rcvd is not None and seen[0].protocol.close_rcvd.code == 1002
