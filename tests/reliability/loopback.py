"""A small real loopback WebSocket server that speaks just enough of either protocol to reply with scripted,
optionally mutated frames: Nineninesix (JSON text frames, ``/tts/websocket``) or Kitta Realtime v2
(MessagePack binary frames, subprotocol ``realtime.tts.msgpack.v2``).

Importable without pytest (``bench/chaos.py`` uses it). Audio is *marked*: every int16 sample of a turn's audio
equals :func:`marker` of the number found in the turn's text (``"t17 ..."`` -> ``marker(17)``), and audio that
belongs to no turn of the client (foreign contexts, frames after ``done``) carries :data:`FOREIGN`. A client
that plays anything but its own marker played stale audio. Clients must ask for the native rate (22050 for
Nineninesix, 24000 for Kitta) so that the bytes pass through unresampled.

``server.arm(Mutation(at, kind, arg))`` mutates the next turn's reply (one Nineninesix context, or one Kitta
session): frame number ``at`` of that reply (clamped to the last one) is replaced, preceded or followed by the
mutation, then the honest rest follows unless the mutation cut the connection. ``server.handshake`` is a FIFO of
handshake actions (``"drop"``, or an HTTP status) consumed one per connection attempt.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

#: the server's own logger (it logs request lines, keys included: it is the server, not the client)
SERVER_LOG = logging.getLogger("reliability.loopback")
KITTA_SUBPROTOCOL = "realtime.tts.msgpack.v2"
NNS_RATE = 22050
KITTA_RATE = 24000
#: the sample value of audio that belongs to none of the client's turns
FOREIGN = -12345
SAMPLES_PER_CHUNK = 441
CHUNKS_PER_TURN = 4
#: frames a server keeps sending after an error (more than websockets' receive queue holds)
FLOOD = 64

#: mutation kinds both protocols understand
COMMON_KINDS: tuple[str, ...] = (
    "wrong_type", "missing_field", "extra_field", "bad_encoding", "wrong_frame_kind", "odd_pcm", "huge",
    "foreign_id", "unknown_id", "duplicate", "dup_final", "early_final", "unknown_error", "null_error",
    "unknown_event", "error_flood", "stray_not_found", "drop", "close",
)  # fmt: skip
NNS_KINDS: tuple[str, ...] = (*COMMON_KINDS, "bad_base64")
KITTA_KINDS: tuple[str, ...] = (*COMMON_KINDS, "seq_gap", "seq_dup", "audio_as_text")
_WRONG_VALUES: tuple[Any, ...] = (None, 123, -1, 1.5, True, "x", [], {}, b"\x00")
_TURN_NO = re.compile(r"\bt(\d+)\b")


def marker(n: int) -> int:
    """The int16 sample value of turn ``n``'s audio (low and high byte differ, so a misaligned byte shows)."""
    return 0x0101 + 0x0203 * (n % 60)


def turn_number(text: str) -> int:
    m = _TURN_NO.search(text)
    return int(m.group(1)) if m else 0


def odd_split(value: int) -> list[bytes]:
    """Two frames of turn audio split at an odd byte offset (a client must carry the odd byte over)."""
    whole = pcm(value, 8)
    return [whole[:5], whole[5:]]


def pcm(value: int, samples: int = SAMPLES_PER_CHUNK) -> bytes:
    return value.to_bytes(2, "little", signed=True) * samples


@dataclass(frozen=True)
class Mutation:
    """Mutate frame ``at`` of the next reply with ``kind``; ``arg`` picks a variant (field, wrong value...)."""

    at: int
    kind: str
    arg: int = 0


DROP = object()
#: end this reply here (no more frames of it), keep the connection
STOP = object()
#: stop reading from the client (so its close cannot complete) until ``server.release`` is set
HOLD = object()


@dataclass
class Close:
    code: int = 1011


@dataclass
class LoopbackServer:
    """``async with LoopbackServer("nineninesix" | "kitta") as srv:`` then ``srv.base_url``."""

    protocol: str
    handshake: list[Any] = field(default_factory=list)
    #: (mutation, turn text) of every armed mutation that fired, for reports
    fired: list[Mutation] = field(default_factory=list)
    connections: int = 0
    #: replies started (Nineninesix contexts, Kitta sessions)
    turns: int = 0
    #: Kitta: close the socket after ``finish``; the page's example has the *client* close it, so by default
    #: the server leaves that to the client
    close_after_finish: bool = False
    #: drop the connection as soon as a cancel arrives (Nineninesix)
    drop_on_cancel: bool = False
    #: set to let a ``hold`` mutation's connection read again
    release: asyncio.Event = field(default_factory=asyncio.Event)
    _armed: list[Mutation] = field(default_factory=list)
    _server: Server | None = None
    _open: set[ServerConnection] = field(default_factory=set)

    async def __aenter__(self) -> LoopbackServer:
        sub = [KITTA_SUBPROTOCOL] if self.protocol == "kitta" else None
        self._server = await serve(
            self._handle, "127.0.0.1", 0, subprotocols=sub, process_request=self._process_request,
            max_size=2**20, ping_interval=None, close_timeout=1.0, logger=SERVER_LOG,
        )  # fmt: skip
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._server.wait_closed(), 3.0)

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(next(iter(self._server.sockets)).getsockname()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def open_connections(self) -> int:
        """Server-side connections whose TCP stream is still up (a client that left cleanly is gone)."""
        return sum(1 for c in self._open if not c.transport.is_closing())

    def arm(self, *mutations: Mutation) -> None:
        """Mutate the next replies, one mutation each, in order."""
        self._armed = list(mutations)

    def _take(self) -> Mutation | None:
        self.turns += 1
        if not self._armed:
            return None
        m = self._armed.pop(0)
        self.fired.append(m)
        return m

    def _process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        self.connections += 1
        if not self.handshake:
            return None
        action = self.handshake.pop(0)
        if action == "drop":
            conn.transport.abort()
            return None
        return Response(int(action), "scripted", Headers([("Retry-After", "0")]), b'{"error":"scripted"}')

    async def _handle(self, conn: ServerConnection) -> None:
        self._open.add(conn)
        try:
            if self.protocol == "kitta":
                await _KittaSession(self, conn).run()
            else:
                await _NnsSession(self, conn).run()
        except ConnectionClosed:
            pass
        finally:
            self._open.discard(conn)


class _Emitter:
    """Sends one reply's frames, applying the armed mutation at its frame index."""

    def __init__(
        self,
        conn: ServerConnection,
        mutation: Mutation | None,
        mutate: Callable[..., list[Any]],
        encode: Callable[[dict[str, Any]], Any],
        release: asyncio.Event,
    ) -> None:
        self.conn = conn
        self.release = release
        self.encode = encode
        self.mutation = mutation
        self.mutate = mutate
        self.n = 0
        self.cut = False
        self.stopped = False

    async def emit(self, frames: list[dict[str, Any]], *, last: bool = False) -> None:
        for i, frame in enumerate(frames):
            if self.stopped:
                return
            outs: list[Any] = [self.encode(frame)]
            m = self.mutation
            if m is not None and (self.n == m.at or (last and i == len(frames) - 1 and m.at > self.n)):
                outs = self.mutate(frame, m)
                self.mutation = None
            self.n += 1
            for out in outs:
                if not await self._send(out):
                    return

    async def _send(self, out: Any) -> bool:
        if self.cut:
            return False
        if out is HOLD:
            self.conn.transport.pause_reading()
            await self.release.wait()
            self.conn.transport.resume_reading()
            return True
        if out is STOP:
            self.stopped = True
            return False
        if out is DROP:
            self.cut = True
            self.conn.transport.abort()
            return False
        if isinstance(out, Close):
            self.cut = True
            await self.conn.close(out.code, "scripted close")
            return False
        await self.conn.send(out)
        return True


# ------------------------------------------------------------------------------------------- Nineninesix


def _nns_encode(frame: dict[str, Any]) -> str:
    return json.dumps(frame)


def _nns_chunk(cid: Any, value: int, samples: int = SAMPLES_PER_CHUNK) -> dict[str, Any]:
    data = base64.b64encode(pcm(value, samples)).decode()
    return {"type": "chunk", "context_id": cid, "done": False, "status_code": 206, "data": data}


def _nns_done(cid: Any) -> dict[str, Any]:
    return {"type": "done", "context_id": cid, "done": True, "status_code": 200}


def _nns_error(cid: Any, code: Any, status: Any) -> dict[str, Any]:
    return {
        "type": "error", "context_id": cid, "done": True, "error_code": code, "status_code": status,
        "title": "scripted", "message": "scripted error", "doc_url": "", "request_id": "req-1",
    }  # fmt: skip


def _mutate_common(
    frame: dict[str, Any], m: Mutation, enc: Callable[[dict[str, Any]], Any]
) -> list[Any] | None:
    """Mutations shared by both protocols, as encoded frames; None for a protocol-specific kind."""
    keys = sorted(frame)
    k = m.kind
    if k == "wrong_type":
        return [enc({**frame, keys[m.arg % len(keys)]: _WRONG_VALUES[m.arg % len(_WRONG_VALUES)]})]
    if k == "missing_field":
        return [enc({x: v for x, v in frame.items() if x != keys[m.arg % len(keys)]})]
    if k == "extra_field":
        return [enc({**frame, f"zz_extra_{m.arg % 5}": m.arg})]
    if k == "duplicate":
        return [enc(frame), enc(frame)]
    if k == "drop":
        return [DROP]
    if k == "close":
        return [Close((1000, 1001, 1008, 1011, 1012, 4000)[m.arg % 6])]
    return None


class _NnsSession:
    def __init__(self, srv: LoopbackServer, conn: ServerConnection) -> None:
        self.srv = srv
        self.conn = conn
        self.texts: dict[str, str] = {}
        self.value = 0

    async def run(self) -> None:
        async for raw in self.conn:
            msg = json.loads(raw)
            cid = msg.get("context_id")
            if msg.get("cancel"):
                if self.srv.drop_on_cancel:
                    self.conn.transport.abort()
                    return
                await self.conn.send(_nns_encode({**_nns_done(cid), "cancelled": True}))
                continue
            self.texts[cid] = self.texts.get(cid, "") + str(msg.get("transcript", ""))
            if not msg.get("continue", False):
                await self._reply(cid, self.texts.pop(cid, ""))

    async def _reply(self, cid: str, text: str) -> None:
        value = self.value = marker(turn_number(text))
        frames = [_nns_chunk(cid, value) for _ in range(CHUNKS_PER_TURN)] + [_nns_done(cid)]
        await _Emitter(self.conn, self.srv._take(), self._mutate, _nns_encode, self.srv.release).emit(
            frames, last=True
        )

    def _mutate(self, frame: dict[str, Any], m: Mutation) -> list[Any]:
        common = _mutate_common(frame, m, _nns_encode)
        if common is not None:
            return common
        cid, k, enc = frame["context_id"], m.kind, _nns_encode
        table: dict[str, Callable[[], list[Any]]] = {
            "bad_encoding": lambda: ['{"type": "chunk", "context_id": ', enc(frame)][: 1 + m.arg % 2],
            "bad_base64": lambda: [enc({**_nns_chunk(cid, 0), "data": "@@not base64!"}), enc(frame)],
            "wrong_frame_kind": lambda: [enc(frame).encode(), enc(frame)],
            "odd_pcm": lambda: [enc({**_nns_chunk(cid, 0), "data": base64.b64encode(p).decode()})
                                for p in odd_split(self.value)] + [enc(frame)],
            "huge": lambda: [enc(_nns_chunk(cid, FOREIGN, 5 * 2**20))],
            "foreign_id": lambda: [enc(_nns_chunk(f"foreign-{m.arg}", FOREIGN)), enc(frame)],
            "unknown_id": lambda: [enc(_nns_chunk(None, FOREIGN)), enc(_nns_done(None)), enc(frame)],
            "dup_final": lambda: [enc(frame), enc(_nns_done(cid)), enc(_nns_chunk(cid, FOREIGN))],
            "early_final": lambda: [enc(_nns_done(cid)), enc({**frame, "data": _nns_chunk(cid, FOREIGN)["data"]})
                                    if frame["type"] == "chunk" else enc(frame)],
            "unknown_error": lambda: [enc(_nns_error(cid, f"zz_unknown_{m.arg % 3}", 500 + m.arg % 100)), enc(frame)],
            "null_error": lambda: [enc({"type": "error", "context_id": cid, "error_code": None,
                                        "status_code": None, "done": None}), enc(frame)],
            "unknown_event": lambda: [enc({"type": f"zz_event_{m.arg % 3}", "context_id": cid}), enc(frame)],
            "error_flood": lambda: [enc(_nns_error(cid, "zz_unknown_flood", 500))]
                                   + [enc(_nns_chunk(cid, FOREIGN)) for _ in range(FLOOD)],
            "stray_not_found": lambda: [enc(_nns_error(cid, "context_not_found", 404)), enc(frame)],
            "concurrent_limit": lambda: [enc(_nns_error(cid, "concurrent_limit", 429)), STOP],
        }  # fmt: skip
        return table[k]()


# ------------------------------------------------------------------------------------------------- Kitta


def _kitta_encode(frame: dict[str, Any]) -> bytes:
    return msgpack.packb(frame, use_bin_type=True)


class _KittaSession:
    def __init__(self, srv: LoopbackServer, conn: ServerConnection) -> None:
        self.srv = srv
        self.conn = conn
        self.rid: str = ""
        self.text = ""
        self.value = 0
        self.seq = 0
        self.emitter = _Emitter(conn, srv._take(), self._mutate, _kitta_encode, srv.release)

    async def run(self) -> None:
        if "authorization" in self.conn.request.headers:
            await self.emitter.emit([{"event": "authenticated"}])
        async for raw in self.conn:
            if self.emitter.cut:
                return
            msg = msgpack.unpackb(raw, raw=False)
            ev = msg.get("event")
            if ev == "auth":
                await self.emitter.emit([{"event": "authenticated"}])
            elif ev == "start":
                self.rid = msg["request_id"]
                ready = {"event": "ready", "request_id": self.rid, "sample_rate": KITTA_RATE, "channels": 1,
                         "bit_depth": 16}  # fmt: skip
                await self.emitter.emit([ready])
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
        common = _mutate_common(frame, m, _kitta_encode)
        if common is not None:
            return common
        enc, k = _kitta_encode, m.kind
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
