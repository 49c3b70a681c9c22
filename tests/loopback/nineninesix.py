"""The loopback server's Nineninesix side: JSON text frames, one reply (context) per final request."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import ServerConnection

from .common import (
    CHUNKS_PER_TURN,
    FLOOD,
    FOREIGN,
    STOP,
    Emitter,
    Mutation,
    marker,
    mutate_common,
    odd_split,
    pcm,
    turn_number,
)

if TYPE_CHECKING:
    from .server import LoopbackServer


def nns_encode(frame: dict[str, Any]) -> str:
    return json.dumps(frame)


def nns_chunk(context_id: Any, audio: bytes) -> dict[str, Any]:
    data = base64.b64encode(audio).decode()
    return {"type": "chunk", "context_id": context_id, "done": False, "status_code": 206, "data": data}


def nns_done(context_id: Any) -> dict[str, Any]:
    return {"type": "done", "context_id": context_id, "done": True, "status_code": 200}


def nns_error(context_id: Any, code: Any, status: Any) -> dict[str, Any]:
    return {
        "type": "error", "context_id": context_id, "done": True, "error_code": code, "status_code": status,
        "title": "scripted", "message": "scripted error", "doc_url": "", "request_id": "req-1",
    }  # fmt: skip


class NnsSession:
    def __init__(self, srv: LoopbackServer, conn: ServerConnection) -> None:
        self.srv = srv
        self.conn = conn
        self.texts: dict[str, str] = {}
        self.value = 0

    async def run(self) -> None:
        async for raw in self.conn:
            msg = json.loads(raw)
            self.srv.messages.append(msg)
            cid = msg.get("context_id")
            if msg.get("cancel"):
                if self.srv.drop_on_cancel:
                    self.conn.transport.abort()
                    return
                await self.conn.send(nns_encode({**nns_done(cid), "cancelled": True}))
                continue
            self.texts[cid] = self.texts.get(cid, "") + str(msg.get("transcript", ""))
            if not msg.get("continue", False):
                await self._reply(cid, self.texts.pop(cid, ""))

    async def _reply(self, cid: str, text: str) -> None:
        value = self.value = marker(turn_number(text))
        frames = [nns_chunk(cid, pcm(value)) for _ in range(CHUNKS_PER_TURN)] + [nns_done(cid)]
        await Emitter(self.conn, self.srv._take(), self._mutate, nns_encode, self.srv.release).emit(
            frames, last=True
        )

    def _mutate(self, frame: dict[str, Any], m: Mutation) -> list[Any]:
        common = mutate_common(frame, m, nns_encode)
        if common is not None:
            return common
        cid, k, enc = frame["context_id"], m.kind, nns_encode
        foreign = nns_chunk(cid, pcm(FOREIGN))
        table: dict[str, Callable[[], list[Any]]] = {
            "bad_encoding": lambda: ['{"type": "chunk", "context_id": ', enc(frame)][: 1 + m.arg % 2],
            "bad_base64": lambda: [enc({**nns_chunk(cid, b""), "data": "@@not base64!"}), enc(frame)],
            "wrong_frame_kind": lambda: [enc(frame).encode(), enc(frame)],
            "odd_pcm": lambda: [enc(nns_chunk(cid, p)) for p in odd_split(self.value)] + [enc(frame)],
            "huge": lambda: [enc(nns_chunk(cid, pcm(FOREIGN, 5 * 2**20)))],
            "foreign_id": lambda: [enc(nns_chunk(f"foreign-{m.arg}", pcm(FOREIGN))), enc(frame)],
            "unknown_id": lambda: [enc(nns_chunk(None, pcm(FOREIGN))), enc(nns_done(None)), enc(frame)],
            "dup_final": lambda: [enc(frame), enc(nns_done(cid)), enc(foreign)],
            "early_final": lambda: [enc(nns_done(cid)), enc({**frame, "data": foreign["data"]})
                                    if frame["type"] == "chunk" else enc(frame)],
            "unknown_error": lambda: [enc(nns_error(cid, f"zz_unknown_{m.arg % 3}", 500 + m.arg % 100)), enc(frame)],
            "null_error": lambda: [enc({"type": "error", "context_id": cid, "error_code": None,
                                        "status_code": None, "done": None}), enc(frame)],
            "unknown_event": lambda: [enc({"type": f"zz_event_{m.arg % 3}", "context_id": cid}), enc(frame)],
            "error_flood": lambda: [enc(nns_error(cid, "zz_unknown_flood", 500))]
                                   + [enc(foreign) for _ in range(FLOOD)],
            "stray_not_found": lambda: [enc(nns_error(cid, "context_not_found", 404)), enc(frame)],
            "concurrent_limit": lambda: [enc(nns_error(cid, "concurrent_limit", 429)), STOP],
        }  # fmt: skip
        return table[k]()


def nns_provider(base_url: str, api_key: str = "sk_996_loopback_test_key", **kw: Any) -> Any:
    """A Nineninesix provider for engine-level tests (its own turns: :func:`nns_turn`)."""
    from ttsbridge.nineninesix import NineninesixTurnProvider

    return NineninesixTurnProvider(api_key, base_url=base_url, **kw)


async def nns_turn(provider: Any, fmt: Any, *, turn_id: str | None = None) -> Any:
    """A bare turn (one context, never retried; ``cancel()`` waits for the server's answer) on the provider's
    pooled connection for ``fmt``: the engine's turn over the provider's dialer, at the wire rate."""
    import uuid

    from ttsbridge.engine.turn import EngineTurn
    from ttsbridge.nineninesix.facts import NineninesixRequest

    turn = EngineTurn(
        provider.dialer,
        NineninesixRequest(fmt, retry=False),
        turn_id=turn_id or str(uuid.uuid4()),
        sample_rate=fmt.sample_rate,
        cancel_timeout=provider.cancel_timeout,
        wait_for_cancel_ack=True,
    )
    return await turn.open()
