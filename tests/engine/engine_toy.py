"""A toy provider for the engine tests: a minimal TurnProtocol and a real loopback server speaking it.

Wire: the client sends ``{"turn", "text"}``, ``{"turn", "end": true}``, ``{"turn", "cancel": true}``; the server
answers each text with ``{"turn", "pcm": hex}`` and an end with ``{"turn", "done": true}`` (unless ``silent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Sequence
from typing import Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Response

from ttsbridge._redact import redact
from ttsbridge.engine import (
    AudioReceived,
    ConnectionFailed,
    ConnectRequest,
    TurnDone,
    TurnFailed,
    TurnProtocol,
)
from ttsbridge.engine.protocol import describe_close
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError, TTSTimeoutError

KEY = "toy-secret-key-123"


class ToyProtocol(TurnProtocol):
    provider = "toy"

    def __init__(self, url: str, owed_timeout: float = 5.0) -> None:
        super().__init__()
        self.url = url
        self.owed_timeout = owed_timeout
        self.turns: dict[str, str] = {}  # id -> "open" | "ending" | "done" | "failed"
        self.owed_since: dict[str, float] = {}
        self.frames_received = 0
        self.heard: set[str] = set()  # turns whose audio has begun
        self._closed = False

    def connect_request(self) -> ConnectRequest:
        return ConnectRequest(f"{self.url}?key={KEY}", secrets=(KEY,))

    def handshake_failed(self, status: int, body: bytes) -> TTSBridgeError:
        return TTSAPIError(
            redact(body.decode(), (KEY,)), provider="toy", error_code=f"http_{status}", status_code=status
        )

    def receive(self, frame: str | bytes, now: float) -> None:
        self.frames_received += 1
        msg = json.loads(frame)
        tid = msg["turn"]
        if self.turns.get(tid) not in ("open", "ending"):
            return
        self.owed_since.pop(tid, None)
        if "pcm" in msg:
            first = tid not in self.heard
            self.heard.add(tid)
            self._emit(AudioReceived(tid, bytes.fromhex(msg["pcm"]), first))
        elif msg.get("done"):
            self.turns[tid] = "done"
            self._emit(TurnDone(tid))

    def connection_lost(self, code: int | None, reason: str, now: float) -> None:
        if self._closed:
            return
        self._closed = True
        err = TTSConnectionError(f"toy: {describe_close(code, reason)}")
        for tid in self.live_turns():
            self.turns[tid] = "failed"
            self._emit(TurnFailed(tid, err))
        self._emit(ConnectionFailed(err))

    def open_turn(self, turn_id: str, request: Any, now: float) -> Any:
        if self._closed:
            raise TTSConnectionError("toy: closed")
        self.turns[turn_id] = "open"
        return None

    def send_text(self, turn_id: str, text: str, now: float) -> None:
        self._send(json.dumps({"turn": turn_id, "text": text}))
        self.owed_since.setdefault(turn_id, now)

    def end_turn(self, turn_id: str, now: float) -> None:
        self.turns[turn_id] = "ending"
        self._send(json.dumps({"turn": turn_id, "end": True}))
        self.owed_since.setdefault(turn_id, now)

    def cancel_turn(self, turn_id: str, now: float) -> None:
        self.turns[turn_id] = "done"
        self._send(json.dumps({"turn": turn_id, "cancel": True}))
        self._emit(TurnDone(turn_id, cancelled=True))

    def next_deadline(self) -> float | None:
        return min(self.owed_since.values()) + self.owed_timeout if self.owed_since else None

    def tick(self, now: float) -> None:
        for tid, since in list(self.owed_since.items()):
            if now >= since + self.owed_timeout:
                del self.owed_since[tid]
                self.turns[tid] = "failed"
                self._emit(TurnFailed(tid, TTSTimeoutError(f"toy: no audio for {tid}")))
                self._send(json.dumps({"turn": tid, "cancel": True}))

    @property
    def closed(self) -> bool:
        return self._closed

    def live_turns(self) -> Sequence[str]:
        return [t for t, s in self.turns.items() if s in ("open", "ending")]


class ToyServer:
    """``async with ToyServer() as srv``: ``srv.url``; ``srv.received`` holds every frame the client sent.

    ``burst``: each text's audio goes out as that many messages of one byte each (the text's bytes, cycled),
    written back to back; ``fragments``: each message is sent as that many WebSocket frames."""

    def __init__(
        self,
        *,
        silent: bool = False,
        reject: int | None = None,
        drop_after: int | None = None,
        burst: int = 1,
        fragments: int = 1,
    ) -> None:
        self.silent, self.reject, self.drop_after = silent, reject, drop_after
        self.burst, self.fragments = burst, fragments
        self.received: list[dict[str, Any]] = []
        self.urls: list[str] = []
        self._server: Server | None = None

    def _process_request(self, conn: ServerConnection, request: Any) -> Response | None:
        self.urls.append(request.path)
        if self.reject is not None:
            return Response(self.reject, "Rejected", Headers(), b"go away " + KEY.encode())
        return None

    async def _handler(self, ws: ServerConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for raw in ws:
                msg = json.loads(raw)
                self.received.append(msg)
                if self.drop_after is not None and len(self.received) >= self.drop_after:
                    ws.transport.abort()
                    return
                if self.silent or msg.get("cancel"):
                    continue
                if "text" in msg:
                    await self._audio(ws, msg["turn"], msg["text"].encode())
                elif msg.get("end"):
                    await ws.send(json.dumps({"turn": msg["turn"], "done": True}))

    async def _audio(self, ws: ServerConnection, turn: str, pcm: bytes) -> None:
        parts = (
            [pcm] if self.burst == 1 else [pcm[i % len(pcm) : i % len(pcm) + 1] for i in range(self.burst)]
        )
        for part in parts:
            text = json.dumps({"turn": turn, "pcm": part.hex()})
            if self.fragments == 1:
                await ws.send(text)
            else:
                n = -(-len(text) // self.fragments)
                await ws.send([text[i : i + n] for i in range(0, len(text), n)])

    async def __aenter__(self) -> ToyServer:
        self._server = await serve(
            self._handler, "127.0.0.1", 0, ping_interval=None, process_request=self._process_request
        )
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(self._server.wait_closed(), 10.0)

    @property
    def url(self) -> str:
        assert self._server is not None
        port = next(iter(self._server.sockets)).getsockname()[1]
        return f"ws://127.0.0.1:{port}/toy"
