"""The loopback server's Kitta Realtime v2 side: MessagePack binary frames, one reply (session) per
connection."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgpack
from websockets.asyncio.server import ServerConnection

from .common import (
    CHUNKS_PER_TURN,
    FLOOD,
    FOREIGN,
    HOLD,
    KITTA_RATE,
    SAMPLES_PER_CHUNK,
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


def kitta_encode(frame: dict[str, Any]) -> bytes:
    return msgpack.packb(frame, use_bin_type=True)


def kitta_ready(request_id: str) -> dict[str, Any]:
    return {"event": "ready", "request_id": request_id, "sample_rate": KITTA_RATE, "channels": 1,
            "bit_depth": 16}  # fmt: skip


class KittaSession:
    def __init__(self, srv: LoopbackServer, conn: ServerConnection) -> None:
        self.srv = srv
        self.conn = conn
        self.rid: str = ""
        self.text = ""
        self.value = 0
        self.seq = 0
        self.emitter = Emitter(conn, srv._take(), self._mutate, kitta_encode, srv.release)

    async def run(self) -> None:
        if "authorization" in self.conn.request.headers:
            await self.emitter.emit([{"event": "authenticated"}])
        async for raw in self.conn:
            if self.emitter.cut:
                return
            msg = msgpack.unpackb(raw, raw=False)
            self.srv.messages.append(msg)
            ev = msg.get("event")
            if ev == "auth":
                await self.emitter.emit([{"event": "authenticated"}])
            elif ev == "start":
                self.rid = msg["request_id"]
                await self.emitter.emit([kitta_ready(self.rid)])
            elif ev == "text":
                self.text += msg["text"]
            elif ev == "flush":
                await self._segment()
            elif ev == "stop":
                await self._segment()
                await self.emitter.emit([{"event": "finish", "request_id": self.rid, "units": 1}], last=True)
                if self.srv.close_after_finish:
                    await self.conn.close(1000)
                    return

    async def _segment(self) -> None:
        if not self.text.strip():
            return
        self.value = (
            marker(turn_number(self.text)) if turn_number(self.text) or not self.value else self.value
        )
        self.text = ""
        frames = [self._audio(self.value) for _ in range(CHUNKS_PER_TURN)]
        frames.append({"event": "usage", "request_id": self.rid, "units": 1, "total_units": 1})
        await self.emitter.emit(frames)

    def _audio(self, value: int, samples: int = SAMPLES_PER_CHUNK, seq: int | None = None) -> dict[str, Any]:
        if seq is None:
            seq, self.seq = self.seq, self.seq + 1
        return {"event": "audio", "request_id": self.rid, "seq": seq, "audio": pcm(value, samples),
                "sample_rate": KITTA_RATE, "channels": 1, "bit_depth": 16}  # fmt: skip

    def _mutate(self, frame: dict[str, Any], m: Mutation) -> list[Any]:
        common = mutate_common(frame, m, kitta_encode)
        if common is not None:
            return common
        enc, k = kitta_encode, m.kind
        fin = {"event": "finish", "request_id": self.rid, "units": 1}
        table: dict[str, Callable[[], list[Any]]] = {
            "bad_encoding": lambda: [b"\xc1\xc1\xc1", enc(frame)][: 1 + m.arg % 2],
            "wrong_frame_kind": lambda: [json.dumps({"event": "audio"}), enc(frame)],
            "odd_pcm": lambda: [enc({**self._audio(0), "audio": p}) for p in odd_split(self.value)] + [enc(frame)],
            "huge": lambda: [enc(self._audio(FOREIGN, 9 * 2**20))],
            "foreign_id": lambda: [enc({**self._audio(FOREIGN, seq=10_000 + m.arg), "request_id": "foreign"}),
                                   enc(frame)],
            "unknown_id": lambda: [enc({x: v for x, v in frame.items() if x != "request_id"})],
            "dup_final": lambda: [enc(frame), enc(fin), enc(self._audio(FOREIGN))],
            "early_final": lambda: [enc(fin), enc({**self._audio(FOREIGN)}), enc(frame)],
            "unknown_error": lambda: [enc({"event": "error", "code": f"zz_unknown_{m.arg % 3}",
                                           "message": "scripted", "retryable": bool(m.arg % 2)}), enc(frame)],
            "null_error": lambda: [enc({"event": "error", "code": None, "message": None, "retryable": None}),
                                   enc(frame)],
            "unknown_event": lambda: [enc({"event": f"zz_event_{m.arg % 3}"}), enc(frame)],
            "error_flood": lambda: [enc({"event": "error", "code": "zz_unknown_flood", "message": "scripted",
                                         "retryable": False})] + [enc(self._audio(FOREIGN)) for _ in range(FLOOD)],
            "stray_not_found": lambda: [enc({"event": "error", "code": "context_not_found", "message": "x",
                                             "retryable": False}), enc(frame)],
            "seq_gap": lambda: [enc({**frame, "seq": frame.get("seq", 0) + 3 + m.arg % 5})
                                if frame.get("event") == "audio" else enc(frame)],
            "seq_dup": lambda: [enc(frame), enc({**frame, "audio": pcm(FOREIGN)})
                                if frame.get("event") == "audio" else enc(frame)],
            "bad_then_hold": lambda: [b"\xc1", *[enc(self._audio(FOREIGN)) for _ in range(FLOOD)], HOLD],
            "audio_as_text": lambda: [enc({**self._audio(FOREIGN), "audio": "AAAA" * 50}), enc(frame)],
        }  # fmt: skip
        return table[k]()
