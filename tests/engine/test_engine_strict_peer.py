"""Frames a strict WebSocket peer may send (issue 18), through the Nineninesix client over a raw loopback
server (the emulator and websockets' server cannot send them): a fragmented text message, a ping between its
fragments, invalid UTF-8 in a text frame, a message over the size limit, a close with a reason. Each gives the
turn's audio, or a typed error naming what happened; the client closes its socket (the server reads its end)
and leaves no task."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from raw_server import RawServer, close_frame
from websockets.frames import Frame, Opcode

from loopback import collect, nns_provider, nns_turn, no_client_tasks_left
from ttsbridge.errors import TTSConnectionError
from ttsbridge.nineninesix import OutputFormat

KEY = "sk_996_strict_peer_key"
CID = "ctx-1"
PCM = b"\x01\x02" * 441
FMT = OutputFormat(sample_rate=22050)


def chunk_json() -> bytes:
    data = base64.b64encode(PCM).decode()
    return json.dumps(
        {"type": "chunk", "context_id": CID, "done": False, "status_code": 206, "data": data}
    ).encode()


def done_frame() -> bytes:
    body = json.dumps({"type": "done", "context_id": CID, "done": True, "status_code": 200}).encode()
    return Frame(Opcode.TEXT, body).serialize(mask=False)


def frame(op: Opcode, data: bytes, fin: bool = True) -> bytes:
    return Frame(op, data, fin=fin).serialize(mask=False)


async def read_client_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One (masked) client frame: ``(opcode, payload)``."""
    head = await reader.readexactly(2)
    size = head[1] & 0x7F
    if size == 126:
        size = int.from_bytes(await reader.readexactly(2), "big")
    elif size == 127:
        size = int.from_bytes(await reader.readexactly(8), "big")
    mask = await reader.readexactly(4)
    payload = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(size)))
    return head[0] & 0x0F, payload


class Peer:
    """The server side of one test: waits for the client's final request, writes ``frames``, then reads what
    the client sends until its end (its close frame's code is kept; EOF proves the socket closed)."""

    def __init__(self, frames: list[bytes]) -> None:
        self.frames = frames
        self.client_ops: list[tuple[int, bytes]] = []
        self.ended = asyncio.Event()

    async def script(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # the client's requests until its continue: false
                op, payload = await read_client_frame(reader)
                if op == Opcode.TEXT and json.loads(payload).get("continue") is False:
                    break
            for data in self.frames:
                writer.write(data)
            await writer.drain()
            while True:
                op, payload = await read_client_frame(reader)
                self.client_ops.append((op, payload))
                if op == Opcode.CLOSE:  # answer it: the close handshake completes, the server closes TCP
                    writer.write(frame(Opcode.CLOSE, payload[:2]))
                    await writer.drain()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self.ended.set()

    @property
    def close_code(self) -> int | None:
        closes = [p for op, p in self.client_ops if op == Opcode.CLOSE]
        return int.from_bytes(closes[0][:2], "big") if closes and len(closes[0]) >= 2 else None


async def run(frames: list[bytes], **client_kw: Any) -> tuple[bytes | BaseException, Peer]:
    peer = Peer(frames)
    async with RawServer(peer.script) as srv:
        base = srv.url.replace("ws://", "http://").rsplit("/", 1)[0]
        client = nns_provider(base, KEY, ping_after_silence=None, **client_kw)
        try:
            ctx = await nns_turn(client, FMT, turn_id=CID)
            await ctx.send("t1 hello")
            await ctx.end()
            try:
                result: bytes | BaseException = await collect(ctx, timeout=5)
            except Exception as exc:
                result = exc
        finally:
            await client.aclose()
        await asyncio.wait_for(peer.ended.wait(), 5)  # the client's socket is closed: the server read its end
        await no_client_tasks_left("nineninesix")
    return result, peer


async def test_a_fragmented_text_message_is_audio() -> None:
    body = chunk_json()
    third = len(body) // 3
    frames = [
        frame(Opcode.TEXT, body[:third], fin=False),
        frame(Opcode.CONT, body[third : 2 * third], fin=False),
        frame(Opcode.CONT, body[2 * third :]),
        done_frame(),
    ]
    result, _ = await run(frames)
    assert result == PCM


async def test_a_ping_between_fragments_is_answered_and_the_message_is_audio() -> None:
    body = chunk_json()
    half = len(body) // 2
    frames = [
        frame(Opcode.TEXT, body[:half], fin=False),
        frame(Opcode.PING, b"between"),
        frame(Opcode.CONT, body[half:]),
        done_frame(),
    ]
    result, peer = await run(frames)
    assert result == PCM
    assert (Opcode.PONG, b"between") in peer.client_ops


async def test_invalid_utf8_in_a_text_frame_is_a_typed_error_and_a_1007_close() -> None:
    bad = b'{"type":"chunk","context_id":"ctx-1","data":"\xff\xfe"}'
    result, peer = await run([frame(Opcode.TEXT, bad)])
    assert isinstance(result, TTSConnectionError), result
    assert "not valid UTF-8" in str(result)
    assert peer.close_code == 1007


async def test_a_message_over_the_size_limit_is_a_typed_error_naming_it() -> None:
    # the header alone says 9 MiB: over the client's limit (8 MiB), refused before the payload is read
    head = bytes([0x81, 127]) + (9 * 2**20).to_bytes(8, "big")
    result, peer = await run([head + b"x" * 64])
    assert isinstance(result, TTSConnectionError), result
    assert "1009" in str(result) and "exceeds" in str(result), result
    assert peer.close_code == 1009


@pytest.mark.parametrize(("code", "reason"), [(1011, "overloaded, try later"), (1001, "going away")])
async def test_a_close_with_a_reason_is_a_typed_error_naming_code_and_reason(code: int, reason: str) -> None:
    result, peer = await run([close_frame(code, reason)])
    assert isinstance(result, TTSConnectionError), result
    assert f"code {code}" in str(result) and reason in str(result), result
    assert peer.close_code == code  # the client echoed the close
