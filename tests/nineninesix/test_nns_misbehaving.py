"""A server that misbehaves (issue 9): frames the client cannot parse, a flood behind a close reply, an
unsolicited ``context_not_found``. Over the shared loopback server (``tests/loopback``), scripted: the emulator
sends only well-formed frames. Every test ends with no socket open on the server and no task of the client left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import pytest
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed

from loopback import (
    LoopbackServer,
    Script,
    collect,
    nns_chunk,
    nns_done,
    nns_provider,
    nns_turn,
    no_client_tasks_left,
    send,
)
from support import wait_until
from ttsbridge.errors import TTSAPIError, TTSConnectionError
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider, OutputFormat
from ttsbridge.nineninesix.wire import NineninesixProtocolError

API_KEY = "sk_996_loopback_test_key"
WAIT = 5.0
FMT = OutputFormat(sample_rate=16000)
FLOOD_BURST = 200
#: Long on purpose: the server never gives up on a half-closed socket before a test's bounded wait does, so a
#: socket the client leaves half-closed is seen as open.
SERVER_CLOSE_TIMEOUT = 20.0
PCM = b"\x01\x00" * 160


def loopback(script: Script) -> LoopbackServer:
    return LoopbackServer("nineninesix", script=script, close_timeout=SERVER_CLOSE_TIMEOUT)


def chunk(context_id: Any, audio: bytes = PCM) -> dict[str, Any]:
    return nns_chunk(context_id, audio)


def make_client(srv: LoopbackServer, **kw: Any) -> NineninesixTurnProvider:
    return nns_provider(srv.base_url, API_KEY, **kw)  # type: ignore[no-any-return]


def answer_with(bad: Any) -> Any:
    """A server answering a turn's final request with one chunk, then ``bad`` (a frame or raw text)."""

    async def on_message(ws: ServerConnection, msg: dict[str, Any]) -> None:
        if msg.get("continue") is False:
            cid = msg["context_id"]
            await send(ws, chunk(cid))
            await ws.send(bad if isinstance(bad, str) else json.dumps(bad(cid)))

    return on_message


# --- 9.1: a frame the client cannot parse leaves no socket or task behind ---------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        # the frame of the report: names the turn, every other field null
        lambda cid: {
            "type": "error",
            "context_id": cid,
            "error_code": None,
            "status_code": None,
            "done": None,
        },
        lambda cid: {"type": "chunk", "context_id": 7, "data": ""},  # names no context we can read
        "{not json",
    ],
    ids=["null-fields-error", "context-id-not-a-string", "not-json"],
)
async def test_a_frame_the_client_cannot_parse_leaves_no_socket_or_task(bad: Any) -> None:
    async with loopback(answer_with(bad)) as srv:
        client = make_client(srv)
        try:
            ctx = await nns_turn(client, FMT)
            await ctx.send("Hello.")
            await ctx.end()
            with pytest.raises(NineninesixProtocolError, match="malformed"):
                await collect(ctx)
        finally:
            await client.aclose()
        await wait_until(lambda: srv.open_connections == 0, WAIT)
        await no_client_tasks_left("nineninesix-")


async def test_a_malformed_frame_through_the_provider_leaves_no_socket_or_task() -> None:
    bad = answer_with(lambda cid: {"type": "error", "context_id": cid, "error_code": None, "done": None})
    async with loopback(bad) as srv:
        provider = NineninesixTurnProvider(API_KEY, base_url=srv.base_url, options=NineninesixOptions())
        try:
            turn = await provider.open_turn(sample_rate=16000)
            await turn.send("Hello.")
            await turn.end()
            with pytest.raises(TTSConnectionError, match="error_code must be a string"):
                await collect(turn)
        finally:
            await provider.aclose()
        await wait_until(lambda: srv.open_connections == 0, WAIT)
        await no_client_tasks_left("nineninesix-")


# --- 9.2: the close after a connection-level error completes while the server keeps streaming --------------


def flooding_server(floods: list[asyncio.Task[None]]) -> Any:
    """A context streams chunks until the socket closes: ``Flood.`` from its start, ``Doomed.`` right after an
    error code outside the catalog, which the client reads as closing the socket (this server keeps it open)."""

    async def flood(ws: ServerConnection, cid: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            while True:
                # bursts without yielding (send() only waits when the socket is full): the close reply the
                # server sends when it reads our close frame is queued behind many unread frames
                for _ in range(FLOOD_BURST):
                    await send(ws, chunk(cid, b"\x01\x00" * 2000))
                await asyncio.sleep(0)

    async def on_message(ws: ServerConnection, msg: dict[str, Any]) -> None:
        cid = msg["context_id"]
        if msg.get("transcript") == "Doomed.":
            await send(
                ws, {"type": "error", "context_id": cid, "error_code": "brand_new", "status_code": 500}
            )
        if msg.get("transcript") in ("Flood.", "Doomed."):
            floods.append(asyncio.create_task(flood(ws, cid)))

    return on_message


async def test_the_close_after_a_socket_closing_error_completes_while_the_server_keeps_streaming() -> None:
    floods: list[asyncio.Task[None]] = []
    async with loopback(flooding_server(floods)) as srv:
        client = make_client(srv)
        try:
            waiting = await nns_turn(client, FMT)
            await waiting.send("Waiting for more text.")
            doomed = await nns_turn(client, FMT)
            await doomed.send("Doomed.")
            await doomed.end()
            for ctx in (doomed, waiting):  # the error is read as closing the socket: every turn on it fails
                with pytest.raises(TTSAPIError, match="brand_new"):
                    await collect(ctx)
            # No aclose() yet: the socket left the pool, so the client itself must finish closing it, reading
            # (and dropping) the flood up to the server's close reply, not leave it half-closed.
            await wait_until(lambda: srv.open_connections == 0, WAIT)
            assert floods
            await asyncio.wait_for(asyncio.gather(*floods), WAIT)  # the server's sends stopped too
        finally:
            await client.aclose()
        await no_client_tasks_left("nineninesix-")


async def test_aclose_completes_while_the_server_keeps_streaming() -> None:
    floods: list[asyncio.Task[None]] = []
    async with loopback(flooding_server(floods)) as srv:
        client = make_client(srv)
        ctx = await nns_turn(client, FMT)
        await ctx.send("Flood.")
        await ctx.end()
        await wait_until(lambda: ctx.facts.audio_bytes > 0, WAIT)
        await asyncio.wait_for(client.aclose(), WAIT)
        with pytest.raises(TTSConnectionError, match="closed by the client"):
            await collect(ctx)
        await wait_until(lambda: srv.open_connections == 0, WAIT)
        await asyncio.wait_for(asyncio.gather(*floods), WAIT)
        await no_client_tasks_left("nineninesix-")


# --- 9.3: a malformed chunk fails its turn only --------------------------------------------------------------


async def test_a_chunk_whose_data_is_not_base64_fails_only_its_turn_and_is_cancelled() -> None:
    async def on_message(ws: ServerConnection, msg: dict[str, Any]) -> None:
        cid = msg["context_id"]
        if msg.get("cancel"):
            await send(ws, nns_done(cid) | {"cancelled": True})
        elif msg.get("transcript") == "Broken.":
            await send(ws, chunk(cid) | {"data": 12345})
        elif msg.get("continue") is False:
            await send(ws, chunk(cid))
            await send(ws, nns_done(cid))

    async with loopback(on_message) as srv:
        client = make_client(srv)
        try:
            broken = await nns_turn(client, FMT)
            await broken.send("Broken.")
            await broken.end()
            with pytest.raises(NineninesixProtocolError, match="data must be a base64 string, got int"):
                await collect(broken)
            # the server is told to stop the broken turn; the connection carries the next turn
            await wait_until(lambda: {"context_id": broken.id, "cancel": True} in srv.messages, WAIT)
            fine = await nns_turn(client, FMT)
            assert fine.connection_reused
            await fine.send("Fine.")
            await fine.end()
            assert await collect(fine) == b"\x01\x00" * 160
        finally:
            await client.aclose()
        await wait_until(lambda: srv.open_connections == 0, WAIT)
        await no_client_tasks_left("nineninesix-")


# --- 9.6: context_not_found for a live context we never cancelled -------------------------------------------


async def test_unsolicited_context_not_found_fails_the_turn_at_once_and_keeps_the_socket() -> None:
    async def on_message(ws: ServerConnection, msg: dict[str, Any]) -> None:
        cid = msg["context_id"]
        if msg.get("transcript") == "Lost.":
            error = {"type": "error", "context_id": cid, "done": True}
            await send(ws, error | {"error_code": "context_not_found", "status_code": 404})
        elif msg.get("continue") is False:
            await send(ws, chunk(cid))
            await send(ws, nns_done(cid))

    async with loopback(on_message) as srv:
        # a long receive_timeout: if the frame were ignored, the turn would wait for audio that never comes
        provider = NineninesixTurnProvider(
            API_KEY,
            base_url=srv.base_url,
            options=NineninesixOptions(sample_rate=16000),
            receive_timeout=60.0,
        )
        try:
            lost = await provider.open_turn(sample_rate=16000)
            await lost.send("Lost.")
            await lost.end()
            with pytest.raises(TTSAPIError) as info:
                await collect(lost, WAIT)
            assert info.value.error_code == "context_not_found" and not info.value.retryable
            nxt = await provider.open_turn(sample_rate=16000)
            await nxt.send("Next.")
            await nxt.end()
            assert await collect(nxt)
            assert srv.open_connections == 1  # one socket carried both turns
        finally:
            await provider.aclose()
        await wait_until(lambda: srv.open_connections == 0, WAIT)
        await no_client_tasks_left("nineninesix-")
