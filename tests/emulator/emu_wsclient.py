"""A raw WebSocket client for testing the emulator's ``/tts/websocket`` (no ttsbridge client code)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ttsbridge.audio.analysis import dominant_frequency
from ttsbridge.audio.g711 import decode_to_pcm16
from ttsbridge.emulator import Emulator

TIMEOUT = 10.0
TONE = {"mode": "id", "id": "tone"}


@dataclass
class Turn:
    """What one context produced: its chunks' audio and the frame that ended it (None if none did)."""

    context_id: str
    audio: bytes = b""
    chunks: int = 0
    final: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = field(default_factory=list)

    def pcm(self, encoding: str = "pcm_s16le") -> bytes:
        return decode_to_pcm16(self.audio, encoding)

    def frequency(self, sample_rate: int = 22050, encoding: str = "pcm_s16le") -> float:
        return dominant_frequency(self.pcm(encoding), sample_rate)


class Session:
    """One WebSocket to the emulator; a reader task files every server frame (all, and per context)."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.frames: list[dict[str, Any]] = []
        self._queues: defaultdict[str | None, asyncio.Queue[dict[str, Any] | None]] = defaultdict(
            asyncio.Queue
        )
        self._all: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def open(
        cls,
        emu: Emulator,
        *,
        query: str = "",
        key: str | None = None,
        via: str = "query",
        headers: dict[str, str] | None = None,
    ) -> Session:
        key = emu.api_key if key is None else key
        extra = dict(headers or {})
        params = [query] if query else []
        if via == "query":
            params.insert(0, f"api_key={key}")
        elif via == "bearer":
            extra["Authorization"] = f"Bearer {key}"
        elif via == "x-api-key":
            extra["X-API-Key"] = key
        url = emu.ws_url + ("?" + "&".join(params) if params else "")
        ws = await asyncio.wait_for(
            websockets.connect(url, additional_headers=extra, max_size=None, ping_interval=None), TIMEOUT
        )
        return cls(ws)

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                frame = json.loads(raw)
                self.frames.append(frame)
                self._queues[frame.get("context_id")].put_nowait(frame)
                self._all.put_nowait(frame)
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()
            for q in [*self._queues.values(), self._all]:
                q.put_nowait(None)

    # -- sending

    async def send(self, msg: dict[str, Any] | str | bytes) -> None:
        await self.ws.send(msg if isinstance(msg, (str, bytes)) else json.dumps(msg))

    async def say(self, context_id: str | None, transcript: str, *, cont: bool = True, **extra: Any) -> None:
        msg: dict[str, Any] = {"transcript": transcript, "continue": cont, "model_id": "gepard-1.0", **extra}
        msg.setdefault("voice", TONE)
        if context_id is not None:
            msg["context_id"] = context_id
        await self.send(msg)

    async def cancel(self, context_id: str | None) -> None:
        msg: dict[str, Any] = {"cancel": True}
        if context_id is not None:
            msg["context_id"] = context_id
        await self.send(msg)

    # -- receiving

    async def next(self, context_id: str | None, timeout: float = TIMEOUT) -> dict[str, Any] | None:
        """Next frame of ``context_id`` (None: frames without one); None once the socket is closed."""
        q = self._queues[context_id]
        if self.closed.is_set() and q.empty():
            return None
        frame = await asyncio.wait_for(q.get(), timeout)
        if frame is None:
            q.put_nowait(None)  # keep signalling closure
        return frame

    async def next_any(self, timeout: float = TIMEOUT) -> dict[str, Any] | None:
        """Next frame of any context, in arrival order (a separate cursor from :meth:`next`)."""
        frame = await asyncio.wait_for(self._all.get(), timeout)
        if frame is None:
            self._all.put_nowait(None)
        return frame

    async def turn(self, context_id: str, timeout: float = TIMEOUT, *, chunks: int | None = None) -> Turn:
        """Collect ``context_id``'s frames until its done/error (or until ``chunks`` chunks, or closure)."""
        t = Turn(context_id)
        while chunks is None or t.chunks < chunks:
            frame = await self.next(context_id, timeout)
            if frame is None:
                break
            t.frames.append(frame)
            if frame["type"] == "chunk":
                t.audio += base64.b64decode(frame["data"])
                t.chunks += 1
            else:
                t.final = frame
                break
        return t

    async def wait_closed(self, timeout: float = TIMEOUT) -> tuple[int | None, str]:
        """Wait until the server closed the socket; ``(close code or None if no close frame, reason)``."""
        await asyncio.wait_for(self.closed.wait(), timeout)
        rcvd = self.ws.protocol.close_rcvd
        return (rcvd.code if rcvd is not None else None), (rcvd.reason if rcvd is not None else "")

    async def close(self) -> None:
        await self.ws.close()
        await asyncio.wait_for(self._reader, TIMEOUT)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
