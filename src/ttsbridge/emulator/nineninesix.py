"""The Nineninesix (Cartesia-compatible) API of the emulator: ``/tts/websocket``, ``/tts/bytes``, ``/tts/sse``
and ``/voices``.

Where the spec pages are silent, the emulator's choices are (docs state them too):

* A socket-closing error frame is followed by a close frame: 1008 for 4xx codes, 1013 for
  ``not_initialized`` (503), 1011 for other 5xx. ``action="close"`` faults close with their ``close_code``
  (default 1001); the idle timeout closes with 1000 (reason ``idle timeout``); emulator shutdown with 1001.
* Invalid JSON, a non-object message, a binary frame or a generation request without a string ``transcript``
  gets ``invalid_request`` (400); the socket stays open. The frame carries the message's ``context_id`` when
  there is one, and an open context of that id ends with it (refunded).
* ``model_id`` is validated on the connection's first generation request (the spec: "validated at the
  gateway on the first request"); later ``model_id`` values are ignored, like later ``output_format`` values.
* A ``voice`` that is not an object with ``mode: "id"`` (e.g. a bare string, or ``mode: "embedding"``) means
  the default voice.
* A ``context_id`` that was cancelled, failed (``generation_failed`` ...) or rejected (``concurrent_limit``)
  stays dead on that connection: later requests naming it are ignored silently, so no stale audio can
  follow. After ``done`` an id is free again: a new request starts a new context.
* A request reaching a context after its ``continue: false`` but before its ``done`` is still rendered before
  the ``done``.
* ``continue: false`` with an empty transcript on an unknown id opens and at once completes a context (a
  ``done`` frame), so clients waiting for ``done`` never hang.
* The idle timeout counts time without a client message (pings count) while no context is rendering.
* Concurrency counts WebSocket contexts (from their first request to ``done``/error/cancel) plus in-flight
  HTTP TTS requests, across the whole emulator.
* Billing: each transcript's characters (markers stripped, trimmed) are charged when the request arrives,
  refunded if it or its context ends with an error frame or the socket is closed by an error; cancelled or
  abandoned (client disconnect) text stays billed.
* HTTP: an unknown voice is 400 ``voice_not_found``; ``generation_failed``/``not_initialized`` are 502
  ``upstream_unavailable``; an error fault with ``after_chunks > 0`` on ``/tts/bytes`` cuts the body (the
  status is already sent); on ``/tts/sse`` it sends an ``error`` event and ends the stream.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import struct
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from aiohttp import WSMsgType, web

from ttsbridge.audio.g711 import encode_from_pcm16
from ttsbridge.audio.resample import resample_oneshot
from ttsbridge.emulator.config import MODEL_ID, NATIVE_SAMPLE_RATE
from ttsbridge.emulator.faults import DOC_URL, ErrorSpec, Fault, error_spec, parse_inband, ws_close_code
from ttsbridge.emulator.voices import VoiceNotFoundError

if TYPE_CHECKING:
    from ttsbridge.emulator.server import Emulator

__all__ = ["EMULATOR_KEY", "OutputFormat", "parse_output_format", "setup_nineninesix_routes"]

log = logging.getLogger("ttsbridge.emulator")

CONTAINERS_WS = ("raw",)
CONTAINERS_HTTP = ("raw", "wav")
ENCODINGS = ("pcm_s16le", "pcm_mulaw", "pcm_alaw")
SAMPLE_RATES = (8000, 16000, 22050)
_TRUE_WORDS = ("true", "1", "yes", "on")

#: Where the app keeps its Emulator.
EMULATOR_KEY: web.AppKey[Any] = web.AppKey("ttsbridge_emulator", object)
_DEAD_IDS_KEPT = 4096


# --- output formats -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputFormat:
    container: str = "raw"
    encoding: str = "pcm_s16le"
    sample_rate: int = NATIVE_SAMPLE_RATE

    @property
    def sample_width(self) -> int:
        return 2 if self.encoding == "pcm_s16le" else 1

    def chunk_bytes(self, chunk_ms: float) -> int:
        samples = max(1, round(self.sample_rate * max(chunk_ms, 1.0) / 1000.0))
        return samples * self.sample_width

    def encode(self, pcm_native: bytes) -> bytes:
        """Native-rate PCM16 -> this format's raw audio (resampled, G.711-encoded)."""
        pcm = resample_oneshot(pcm_native, NATIVE_SAMPLE_RATE, self.sample_rate)
        return encode_from_pcm16(pcm, self.encoding)


def parse_output_format(
    value: Any, *, containers: tuple[str, ...] = CONTAINERS_WS, defaults: bool = True
) -> tuple[OutputFormat | None, str | None, str]:
    """Validate an ``output_format`` object: ``(format, None, "")`` or ``(None, error_code, message)``.

    With ``defaults`` missing fields take the defaults (raw / pcm_s16le / 22050); without, they are errors.
    """
    if not isinstance(value, dict):
        return None, "unsupported_container", "output_format must be an object"
    container = value.get("container", "raw" if defaults else None)
    encoding = value.get("encoding", "pcm_s16le" if defaults else None)
    rate = value.get("sample_rate", NATIVE_SAMPLE_RATE if defaults else None)
    if container not in containers:
        return (
            None,
            "unsupported_container",
            f"unsupported container {container!r}; allowed: {list(containers)}",
        )
    if encoding not in ENCODINGS:
        return None, "unsupported_encoding", f"unsupported encoding {encoding!r}; allowed: {list(ENCODINGS)}"
    if isinstance(rate, bool) or not isinstance(rate, int) or rate not in SAMPLE_RATES:
        return None, "invalid_sample_rate", f"unsupported sample_rate {rate!r}; allowed: {list(SAMPLE_RATES)}"
    return OutputFormat(container, encoding, rate), None, ""


def _voice_of(value: Any, default: str) -> str:
    """The voice id a request names (mode "id"), else the default voice."""
    if isinstance(value, dict) and value.get("mode", "id") == "id" and isinstance(value.get("id"), str):
        return value["id"]
    return default


def _error_frame(spec: ErrorSpec, context_id: str | None, message: str | None = None) -> dict[str, Any]:
    return {
        "type": "error",
        "context_id": context_id,
        "done": True,
        "error_code": spec.code,
        "status_code": spec.status,
        "title": spec.title,
        "message": message or spec.message,
        "doc_url": f"{DOC_URL}#{spec.code.replace('_', '-')}",
        "request_id": str(uuid.uuid4()),
    }


def _chunk_frame(context_id: str, data: bytes) -> dict[str, Any]:
    return {
        "type": "chunk",
        "context_id": context_id,
        "done": False,
        "status_code": 206,
        "data": base64.b64encode(data).decode("ascii"),
    }


def _done_frame(context_id: str, *, cancelled: bool = False) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "done", "context_id": context_id, "done": True, "status_code": 200}
    if cancelled:
        frame["cancelled"] = True
    return frame


def _api_key_of(request: web.Request, *, allow_query: bool) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    key = request.headers.get("X-API-Key")
    if key:
        return key.strip()
    if allow_query:
        return request.query.get("api_key")
    return None


def _json_error(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": error, "message": message}, status=status, headers=headers)


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


# --- WebSocket ----------------------------------------------------------------------------------------------


@dataclass
class _Item:
    """One transcript queued in a context."""

    text: str
    chars: int
    voice_id: str
    fault: Fault | None
    settled: bool = False  # confirmed (rendered), billed (cancel) or refunded


@dataclass
class _Context:
    id: str
    pending: deque[_Item] = field(default_factory=deque)
    items: list[_Item] = field(default_factory=list)
    ended: bool = False
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    generating: bool = False
    first_chunk: bool = True
    clock: float = 0.0


@dataclass
class _Out:
    kind: Literal["frame", "close", "drop", "stop"]
    frame: dict[str, Any] | None = None
    context_id: str | None = None
    is_chunk: bool = False
    code: int = 1000
    reason: str = ""


class _Outbox:
    """Frames waiting for the connection's writer, FIFO, bounded for chunks (back-pressure)."""

    def __init__(self, limit: int = 32) -> None:
        self._items: deque[_Out] = deque()
        self._limit = limit
        self._cond = asyncio.Condition()
        self.closed = False

    async def put(self, out: _Out, *, wait: bool = True) -> None:
        async with self._cond:
            if wait:
                await self._cond.wait_for(lambda: self.closed or len(self._items) < self._limit)
            if self.closed:
                return
            self._items.append(out)
            if out.kind != "frame":
                self.closed = True
            self._cond.notify_all()

    async def get(self) -> _Out:
        async with self._cond:
            await self._cond.wait_for(lambda: bool(self._items))
            out = self._items.popleft()
            self._cond.notify_all()
            return out

    async def finish(self) -> None:
        """Let the writer end after what is queued (even when closed to new frames)."""
        async with self._cond:
            self.closed = True
            self._items.append(_Out("stop"))
            self._cond.notify_all()

    def purge(self, context_id: str) -> int:
        """Drop the queued chunk frames of ``context_id``; return how many."""
        keep = deque(o for o in self._items if not (o.is_chunk and o.context_id == context_id))
        n = len(self._items) - len(keep)
        self._items = keep
        return n


class _WSConnection:
    def __init__(self, emu: Emulator, request: web.Request, ws: web.WebSocketResponse, number: int) -> None:
        self.emu = emu
        self.request = request
        self.ws = ws
        self.number = number
        self.cancel_ack = request.query.get("cancel_ack", "").strip().lower() in _TRUE_WORDS
        self.outbox = _Outbox()
        self.contexts: dict[str, _Context] = {}
        self.dead: dict[str, None] = {}
        self.output_format: OutputFormat | None = None
        self.model_checked = False
        self.closing = False
        self.aborted = False
        self.last_activity = asyncio.get_running_loop().time()

    # -- plumbing

    def abort(self) -> None:
        """Cut the TCP connection now, no close frame (a dead network)."""
        if self.aborted:
            return
        self.aborted = True
        self.closing = True
        self.outbox.closed = True
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        self.emu.stats.drops += 1
        self.emu.notify()

    async def shutdown(self, code: int = 1001, reason: str = "server shutting down") -> None:
        await self._close(code, reason)

    async def _send(self, frame: dict[str, Any], *, chunk_of: str | None = None, wait: bool = True) -> None:
        await self.outbox.put(
            _Out("frame", frame=frame, context_id=chunk_of, is_chunk=chunk_of is not None), wait=wait
        )

    async def _close(self, code: int, reason: str = "") -> None:
        if self.closing:
            return
        self.closing = True
        await self.outbox.put(_Out("close", code=code, reason=reason), wait=False)

    async def _writer(self) -> None:
        stats = self.emu.stats
        try:
            while True:
                out = await self.outbox.get()
                if out.kind == "frame":
                    assert out.frame is not None
                    await self.ws.send_str(json.dumps(out.frame))
                    if out.is_chunk:
                        stats.chunks_sent += 1
                        stats.mark_chunk(out.context_id or "")
                    elif out.frame.get("type") == "error":
                        stats.errors_sent.append((self.number, out.frame["error_code"]))
                        self.emu.notify()
                elif out.kind == "close":
                    stats.close_codes.append((self.number, out.code))
                    self.emu.notify()
                    await self.ws.close(code=out.code, message=out.reason.encode())
                    return
                elif out.kind == "drop":
                    self.abort()
                    return
                else:  # stop
                    return
        except (ConnectionError, RuntimeError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                raise
            self.closing = True
            self.outbox.closed = True

    def _busy(self) -> bool:
        return any(c.generating or c.pending for c in self.contexts.values())

    # -- main loop

    async def run(self) -> None:
        writer = asyncio.create_task(self._writer())
        try:
            while True:
                idle = self.emu.config.idle_timeout_s
                try:
                    msg = await self.ws.receive(
                        timeout=idle if idle and idle > 0 and not self.closing else None
                    )
                except asyncio.TimeoutError:
                    if self._busy():
                        continue
                    await self._close(1000, "idle timeout")
                    continue
                if msg.type == WSMsgType.TEXT:
                    if not self.closing:
                        await self._on_text(msg.data)
                elif msg.type == WSMsgType.BINARY:
                    if not self.closing:
                        self.emu.stats.messages.append((self.number, {"<binary>": len(msg.data)}))
                        await self._send(
                            _error_frame(
                                error_spec("invalid_request"),
                                None,
                                "binary frames are not supported; send JSON text",
                            )
                        )
                else:  # CLOSE, CLOSING, CLOSED, ERROR
                    break
        finally:
            self.closing = True
            tasks = [c.task for c in self.contexts.values() if c.task is not None and not c.task.done()]
            for task in tasks:
                task.cancel()
            for ctx in list(self.contexts.values()):
                self._forget(ctx)
            if tasks:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=5.0)
            if not writer.done():
                await self.outbox.finish()
                try:
                    await asyncio.wait_for(asyncio.shield(writer), timeout=6.0)
                except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                    writer.cancel()
            if not self.ws.closed and not self.aborted:
                with contextlib.suppress(Exception):
                    await self.ws.close()

    async def _on_text(self, data: str) -> None:
        stats = self.emu.stats
        try:
            msg = json.loads(data)
        except ValueError:
            stats.messages.append((self.number, {"<invalid json>": data[:200]}))
            self.emu.notify()
            await self._send(_error_frame(error_spec("invalid_request"), None, "message is not valid JSON"))
            return
        if not isinstance(msg, dict):
            stats.messages.append((self.number, {"<not an object>": msg}))
            self.emu.notify()
            await self._send(
                _error_frame(error_spec("invalid_request"), None, "message must be a JSON object")
            )
            return
        if self.emu.config.log_messages:
            stats.messages.append((self.number, msg))
        self.emu.notify()
        if msg.get("cancel") is True:
            await self._on_cancel(msg)
        else:
            await self._on_generate(msg)

    # -- cancel

    async def _on_cancel(self, msg: dict[str, Any]) -> None:
        stats = self.emu.stats
        stats.cancels += 1
        ctx_id = msg.get("context_id")
        if not isinstance(ctx_id, str) or not ctx_id:
            if self.cancel_ack:
                await self._send(_error_frame(error_spec("missing_context_id"), None), wait=False)
            return
        ctx = self.contexts.get(ctx_id)
        if ctx is None:
            if self.cancel_ack:
                await self._send(_error_frame(error_spec("context_not_found"), ctx_id), wait=False)
            return
        if ctx.task is not None:
            ctx.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ctx.task
        self.outbox.purge(ctx_id)
        for item in ctx.items:
            item.settled = True  # cancelled text stays billed
        self._forget(ctx, dead=True)
        stats.contexts_cancelled += 1
        self.emu.notify()
        if self.cancel_ack:
            await self._send(_done_frame(ctx_id, cancelled=True), wait=False)

    # -- generation requests

    async def _fail_connection(self, code: str, context_id: str | None, message: str | None = None) -> None:
        """A socket-closing catalog error: error frame, refunds, close frame."""
        if self.closing:
            return
        spec = error_spec(code)
        for ctx in list(self.contexts.values()):
            self._refund(ctx)
            if ctx.id != context_id:
                # The context whose worker is failing the connection must not cancel itself here.
                if ctx.task is not None and ctx.task is not asyncio.current_task():
                    ctx.task.cancel()
        await self._send(_error_frame(spec, context_id, message), wait=False)
        self.emu.stats.contexts_failed += len(self.contexts)
        await self._close(ws_close_code(spec), spec.code)

    def _refund(self, ctx: _Context) -> None:
        for item in ctx.items:
            if not item.settled:
                item.settled = True
                self.emu.refund(item.chars)

    def _forget(self, ctx: _Context, *, dead: bool = False) -> None:
        if self.contexts.get(ctx.id) is ctx:
            del self.contexts[ctx.id]
            self.emu.release_slot()
        if dead:
            self._mark_dead(ctx.id)

    def _mark_dead(self, context_id: str) -> None:
        self.dead[context_id] = None
        while len(self.dead) > _DEAD_IDS_KEPT:
            self.dead.pop(next(iter(self.dead)))

    async def _fail_context(self, ctx: _Context, code: str, message: str | None = None) -> None:
        """A context-ending error (``generation_failed``...): the error frame, refunds, the id dies."""
        if ctx.task is not None and ctx.task is not asyncio.current_task() and not ctx.task.done():
            ctx.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ctx.task
        self._refund(ctx)
        self.outbox.purge(ctx.id)
        self._forget(ctx, dead=True)
        self.emu.stats.contexts_failed += 1
        self.emu.notify()
        await self._send(_error_frame(error_spec(code), ctx.id, message), wait=False)

    async def _on_generate(self, msg: dict[str, Any]) -> None:
        emu = self.emu
        raw_id = msg.get("context_id")
        ctx_id = raw_id if isinstance(raw_id, str) and raw_id else str(uuid.uuid4())
        transcript = msg.get("transcript")
        if not isinstance(transcript, str):
            ctx = self.contexts.get(ctx_id)
            text = "generation request needs a string transcript (or cancel: true)"
            if ctx is not None:
                await self._fail_context(ctx, "invalid_request", text)
            else:
                await self._send(_error_frame(error_spec("invalid_request"), raw_id, text), wait=False)
            return
        cont = msg.get("continue", False) is True

        # Gateway: model on the connection's first request; format from the first request carrying one.
        if not self.model_checked:
            self.model_checked = True
            model = msg.get("model_id")
            if model is not None and model != MODEL_ID:
                await self._fail_connection(
                    "unknown_model", ctx_id, f"unknown model_id {model!r}; use {MODEL_ID!r}"
                )
                return
        if self.output_format is None and msg.get("output_format") is not None:
            fmt, err, text = parse_output_format(msg["output_format"])
            if fmt is None:
                assert err is not None
                await self._fail_connection(err, ctx_id, text)
                return
            self.output_format = fmt
        voice_id = _voice_of(msg.get("voice"), emu.voices.default_voice_id)
        if voice_id not in emu.voices:
            await self._fail_connection("voice_not_found", ctx_id, f"voice {voice_id!r} not found")
            return
        if ctx_id in self.dead:
            return

        inband: Fault | None = None
        text = transcript
        if emu.config.inband_faults:
            text, inband = parse_inband(transcript)
        text = text.strip()
        has_work = bool(text) or inband is not None

        ctx = self.contexts.get(ctx_id)
        if ctx is None:
            if not has_work and cont:
                return  # nothing to do yet; the context opens with its first text
            if not emu.acquire_slot():
                emu.stats.contexts_rejected += 1
                self._mark_dead(ctx_id)
                emu.notify()
                await self._send(_error_frame(error_spec("concurrent_limit"), ctx_id), wait=False)
                return
            ctx = _Context(ctx_id)
            self.contexts[ctx_id] = ctx
            emu.stats.contexts_started += 1
            emu.stats.mark_request(ctx_id, transcript)
            ctx.task = asyncio.create_task(self._render_context(ctx))
            emu.notify()

        if has_work:
            chars = len(text)
            if chars and not emu.charge(chars):
                await self._fail_connection(
                    "insufficient_credits", ctx_id, f"insufficient credits for {chars} characters"
                )
                return
            fault = inband if inband is not None else emu.faults.match(transcript)
            item = _Item(text, chars, voice_id, fault)
            ctx.items.append(item)
            ctx.pending.append(item)
        if not cont:
            ctx.ended = True
        ctx.wakeup.set()

    async def _render_context(self, ctx: _Context) -> None:
        try:
            while True:
                while not ctx.pending:
                    if ctx.ended:
                        self._forget(ctx)
                        self.emu.stats.contexts_done += 1
                        self.emu.notify()
                        await self._send(_done_frame(ctx.id), wait=False)
                        return
                    ctx.wakeup.clear()
                    await ctx.wakeup.wait()
                item = ctx.pending.popleft()
                ctx.generating = True
                try:
                    ok = await self._render_item(ctx, item)
                finally:
                    ctx.generating = False
                if not ok:
                    return
                item.settled = True  # confirmed
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug or a synthesis failure: report it like the real upstream would
            log.warning("emulator: context rendering failed: %s", type(exc).__name__)
            if self.contexts.get(ctx.id) is ctx:
                await self._fail_context(ctx, "generation_failed", "synthesis backend error")

    async def _render_item(self, ctx: _Context, item: _Item) -> bool:
        """Render one transcript; False if a fault ended the context or the connection."""
        emu = self.emu
        cfg = emu.config
        fault = item.fault
        fmt = self.output_format or OutputFormat()
        if ctx.first_chunk:
            ctx.first_chunk = False
            if cfg.first_chunk_latency_s > 0:
                await asyncio.sleep(cfg.first_chunk_latency_s)
        if fault is not None and fault.after_chunks == 0:
            return await self._fire(ctx, fault)
        pcm = await emu.voices.synthesize(item.voice_id, item.text, NATIVE_SAMPLE_RATE)
        audio = fmt.encode(pcm)
        step = fmt.chunk_bytes(cfg.chunk_ms)
        sent = 0
        loop = asyncio.get_running_loop()
        for off in range(0, len(audio), step):
            if fault is not None and sent >= fault.after_chunks:
                return await self._fire(ctx, fault)
            piece = audio[off : off + step]
            rate = cfg.realtime_factor
            if rate > 0:
                now = loop.time()
                if ctx.clock > now:
                    await asyncio.sleep(ctx.clock - now)
                else:
                    ctx.clock = now
                ctx.clock += len(piece) / fmt.sample_width / fmt.sample_rate / rate
            await self._send(_chunk_frame(ctx.id, piece), chunk_of=ctx.id)
            sent += 1
            await asyncio.sleep(0)  # let other contexts and cancels in
        if fault is not None:
            return await self._fire(ctx, fault)
        return True

    async def _fire(self, ctx: _Context, fault: Fault) -> bool:
        emu = self.emu
        emu.stats.faults_fired.append(_fault_label(fault))
        emu.notify()
        if fault.action == "error":
            spec = fault.spec
            if spec.closes:
                await self._fail_connection(spec.code, ctx.id)
            else:
                await self._fail_context(ctx, spec.code)
            return False
        if fault.action == "drop":
            await self.outbox.put(_Out("drop"), wait=False)
            await _forever()
        if fault.action == "close":
            await self._close(fault.close_code, "closed by fault")
            await _forever()
        await _forever()  # stall: nothing more for this context, the socket stays open
        return False


async def handle_websocket(request: web.Request) -> web.StreamResponse:
    emu: Emulator = request.app[EMULATOR_KEY]
    key = _api_key_of(request, allow_query=True)
    if not emu.config.is_valid_key(key):
        emu.stats.ws_rejected += 1
        emu.notify()
        return _json_error(401, "unauthorized", "missing or invalid API key")
    ws = web.WebSocketResponse(timeout=5.0, autoping=True, max_msg_size=4 * 1024 * 1024)
    await ws.prepare(request)
    conn = _WSConnection(emu, request, ws, emu.next_connection_number())
    emu.stats.ws_connections += 1
    emu.stats.ws_open += 1
    emu.register_connection(conn)
    emu.notify()
    try:
        await conn.run()
    finally:
        emu.unregister_connection(conn)
        emu.stats.ws_open -= 1
        emu.notify()
    return ws


# --- HTTP ---------------------------------------------------------------------------------------------------


@dataclass
class _HttpJob:
    transcript: str  # as sent (fault triggers match it)
    text: str  # markers stripped, trimmed: what is spoken and billed
    voice_id: str
    fmt: OutputFormat
    context_id: str
    inband: Fault | None


def _http_check_key(request: web.Request) -> web.Response | None:
    emu: Emulator = request.app[EMULATOR_KEY]
    emu.stats.http_requests += 1
    emu.notify()
    if not emu.config.is_valid_key(_api_key_of(request, allow_query=False)):
        return _json_error(401, "unauthorized", "missing or invalid API key")
    return None


def _http_error_for(emu: Emulator, spec: ErrorSpec, message: str | None = None) -> web.Response:
    headers = {"Retry-After": f"{emu.config.retry_after_s:g}"} if spec.http_status == 429 else None
    emu.stats.errors_sent.append((None, spec.code))
    emu.notify()
    return _json_error(spec.http_status, spec.http_error, message or spec.message, headers)


async def _http_parse(
    request: web.Request, containers: tuple[str, ...]
) -> tuple[_HttpJob | None, web.Response | None]:
    emu: Emulator = request.app[EMULATOR_KEY]
    try:
        body = await request.json()
    except ValueError:
        return None, _json_error(400, "invalid_request", "body is not valid JSON")
    if not isinstance(body, dict):
        return None, _json_error(400, "invalid_request", "body must be a JSON object")
    for name in ("model_id", "transcript", "voice", "output_format"):
        if body.get(name) is None:
            return None, _json_error(400, "invalid_request", f"missing required field {name!r}")
    if body["model_id"] != MODEL_ID:
        return None, _json_error(
            400, "unknown_model", f"unknown model_id {body['model_id']!r}; use {MODEL_ID!r}"
        )
    transcript = body["transcript"]
    if not isinstance(transcript, str):
        return None, _json_error(400, "invalid_request", "transcript must be a string")
    fmt, _code, problem = parse_output_format(body["output_format"], containers=containers, defaults=False)
    if fmt is None:
        return None, _json_error(400, "invalid_output_format", problem)
    voice = body["voice"]
    voice_id = voice if isinstance(voice, str) else _voice_of(voice, emu.voices.default_voice_id)
    if voice_id not in emu.voices:
        return None, _http_error_for(emu, error_spec("voice_not_found"), f"voice {voice_id!r} not found")
    inband: Fault | None = None
    text = transcript
    if emu.config.inband_faults:
        text, inband = parse_inband(transcript)
    text = text.strip()
    if not text and inband is None:
        return None, _json_error(400, "invalid_request", "transcript is empty")
    raw_id = body.get("context_id")
    ctx_id = raw_id if isinstance(raw_id, str) and raw_id else str(uuid.uuid4())
    return _HttpJob(transcript, text, voice_id, fmt, ctx_id, inband), None


def _wav_header(fmt: OutputFormat, data_len: int) -> bytes:
    """RIFF header for ``data_len`` bytes of audio: PCM16 (tag 1), or G.711 μ-law (7) / A-law (6) with a fact
    chunk."""
    if fmt.encoding == "pcm_s16le":
        fmt_chunk = struct.pack("<HHIIHH", 1, 1, fmt.sample_rate, fmt.sample_rate * 2, 2, 16)
        extra = b""
    else:
        tag = 7 if fmt.encoding == "pcm_mulaw" else 6
        fmt_chunk = struct.pack("<HHIIHHH", tag, 1, fmt.sample_rate, fmt.sample_rate, 1, 8, 0)
        extra = b"fact" + struct.pack("<II", 4, data_len)
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk + extra
    return (
        b"RIFF" + struct.pack("<I", len(body) + 8 + data_len) + body + b"data" + struct.pack("<I", data_len)
    )


class _HttpRender:
    """Shared body of /tts/bytes and /tts/sse: slot, credits, faults, synthesis, pacing."""

    def __init__(self, emu: Emulator, job: _HttpJob) -> None:
        self.emu = emu
        self.job = job
        self.charged = 0
        self.fault: Fault | None = None
        self.clock = 0.0

    def begin(self) -> web.Response | None:
        """Take a concurrency slot, charge the credits and arm a fault; an error response if refused."""
        emu = self.emu
        if not emu.acquire_slot():
            emu.stats.contexts_rejected += 1
            return _http_error_for(
                emu, error_spec("rate_limited"), "concurrency limit exceeded for your tier"
            )
        chars = len(self.job.text)
        if chars and not emu.charge(chars):
            emu.release_slot()
            return _http_error_for(emu, error_spec("insufficient_credits"))
        self.charged = chars
        emu.stats.contexts_started += 1
        self.fault = self.job.inband if self.job.inband is not None else emu.faults.match(self.job.transcript)
        if self.fault is not None:
            emu.stats.faults_fired.append(_fault_label(self.fault))
        emu.notify()
        return None

    def end(self, *, refund: bool = False) -> None:
        if refund and self.charged:
            self.emu.refund(self.charged)
        self.charged = 0
        self.emu.release_slot()
        self.emu.notify()

    def early_error(self) -> web.Response | None:
        """The error answer of an ``error`` fault that fires before any audio."""
        fault = self.fault
        if fault is not None and fault.action == "error" and fault.after_chunks == 0:
            return _http_error_for(self.emu, fault.spec)
        return None

    async def audio(self) -> bytes:
        """The whole audio in the job's format (after the first-chunk latency)."""
        emu = self.emu
        if emu.config.first_chunk_latency_s > 0:
            await asyncio.sleep(emu.config.first_chunk_latency_s)
        pcm = await emu.voices.synthesize(self.job.voice_id, self.job.text, NATIVE_SAMPLE_RATE)
        return self.job.fmt.encode(pcm)

    async def pieces(self, audio: bytes) -> AsyncIterator[bytes]:
        """``audio`` in ``chunk_ms`` pieces, paced; stops where the armed fault fires."""
        emu = self.emu
        fmt = self.job.fmt
        step = fmt.chunk_bytes(emu.config.chunk_ms)
        loop = asyncio.get_running_loop()
        for sent, off in enumerate(range(0, len(audio), step)):
            if self.fault is not None and sent >= self.fault.after_chunks:
                return
            piece = audio[off : off + step]
            rate = emu.config.realtime_factor
            if rate > 0:
                now = loop.time()
                if self.clock > now:
                    await asyncio.sleep(self.clock - now)
                else:
                    self.clock = now
                self.clock += len(piece) / fmt.sample_width / fmt.sample_rate / rate
            yield piece

    async def stall(self, request: web.Request) -> None:
        """Send nothing more until the client goes away or the emulator stops."""
        # aiohttp gives a handler no client-disconnect event (handler cancellation is off): poll.
        transport = request.transport
        while not self.emu.stopping and transport is not None and not transport.is_closing():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


def _fault_label(fault: Fault) -> str:
    return f"error:{fault.error_code}" if fault.action == "error" else fault.action


async def _http_begin(request: web.Request, containers: tuple[str, ...]) -> _HttpRender | web.Response:
    """The shared start of ``/tts/bytes`` and ``/tts/sse``: key, body, then a concurrency slot and credits.
    Returns the render, or the error answer to send instead."""
    if (denied := _http_check_key(request)) is not None:
        return denied
    job, err = await _http_parse(request, containers)
    if job is None:
        assert err is not None
        return err
    r = _HttpRender(request.app[EMULATOR_KEY], job)
    if (denied := r.begin()) is not None:
        return denied
    return r


async def _http_cut(r: _HttpRender, request: web.Request, fault: Fault) -> None:
    """A fault fires mid-body, after the status went out: stall first if asked, then drop the connection."""
    if fault.action == "stall":
        await r.stall(request)
    if request.transport is not None:
        request.transport.abort()


async def handle_bytes(request: web.Request) -> web.StreamResponse:
    begun = await _http_begin(request, CONTAINERS_HTTP)
    if isinstance(begun, web.Response):
        return begun
    r, job = begun, begun.job
    refund = True
    try:
        if (answer := r.early_error()) is not None:
            return answer
        audio = await r.audio()
        fault = r.fault
        header = _wav_header(job.fmt, len(audio)) if job.fmt.container == "wav" else b""
        content_type = "audio/wav" if job.fmt.container == "wav" else "application/octet-stream"
        resp = web.StreamResponse(status=200, headers={"Content-Type": content_type})
        resp.content_length = len(header) + len(audio)
        await resp.prepare(request)
        if header:
            await resp.write(header)
        async for piece in r.pieces(audio):
            await resp.write(piece)
        if fault is None:
            refund = False
            await resp.write_eof()
            return resp
        # The fault fires mid-body: the status is sent already, so the body is cut short (or stalls).
        refund = fault.action == "error"
        await _http_cut(r, request, fault)
        return resp
    finally:
        r.end(refund=refund)


def _sse(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


async def handle_sse(request: web.Request) -> web.StreamResponse:
    emu: Emulator = request.app[EMULATOR_KEY]
    begun = await _http_begin(request, CONTAINERS_WS)
    if isinstance(begun, web.Response):
        return begun
    r, job = begun, begun.job
    refund = True
    try:
        if (answer := r.early_error()) is not None:
            return answer
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        async for piece in r.pieces(await r.audio()):
            event = _chunk_frame(job.context_id, piece)
            event["step_time"] = 0.0
            await resp.write(_sse(event))
        fault = r.fault
        if fault is None:
            refund = False
            await resp.write(
                _sse({"type": "done", "done": True, "status_code": 200, "context_id": job.context_id})
            )
            await resp.write_eof()
            return resp
        refund = fault.action == "error"
        if fault.action == "error":
            emu.stats.errors_sent.append((None, fault.spec.code))
            await resp.write(_sse(_error_frame(fault.spec, job.context_id)))
            await resp.write_eof()
            return resp
        if fault.action == "close":
            await resp.write_eof()  # the stream just ends: no done event
            return resp
        await _http_cut(r, request, fault)
        return resp
    finally:
        r.end(refund=refund)


# --- voices -------------------------------------------------------------------------------------------------


async def handle_voices_list(request: web.Request) -> web.Response:
    emu: Emulator = request.app[EMULATOR_KEY]
    if (denied := _http_check_key(request)) is not None:
        return denied
    q = request.query
    try:
        limit = int(q.get("limit", "10"))
    except ValueError:
        return _json_error(400, "invalid_request", "limit must be an integer")
    if not 1 <= limit <= 100:
        return _json_error(400, "invalid_request", "limit must be between 1 and 100")
    voices = emu.voices.all_voices()
    if (search := q.get("q")) is not None:
        s = search.lower()
        voices = [v for v in voices if s in v.name.lower() or s in v.description.lower() or s in v.id.lower()]
    if (gender := q.get("gender")) is not None:
        voices = [v for v in voices if v.gender == gender]
    if (is_owner := q.get("is_owner")) is not None:
        want = is_owner.lower() in _TRUE_WORDS
        voices = [v for v in voices if v.is_owner == want]
    ids = [v.id for v in voices]
    after, before = q.get("starting_after"), q.get("ending_before")
    if after is not None:
        if after not in ids:
            return _json_error(400, "invalid_request", f"starting_after: unknown voice id {after!r}")
        start = ids.index(after) + 1
        page = voices[start : start + limit]
        has_more = start + limit < len(voices)
    elif before is not None:
        if before not in ids:
            return _json_error(400, "invalid_request", f"ending_before: unknown voice id {before!r}")
        end = ids.index(before)
        page = voices[max(0, end - limit) : end]
        has_more = end - limit > 0
    else:
        page = voices[:limit]
        has_more = limit < len(voices)
    return web.json_response(
        {
            "data": [v.to_api() for v in page],
            "has_more": has_more,
            "next_page": page[-1].id if has_more and page else None,
        }
    )


async def handle_voice_get(request: web.Request) -> web.Response:
    emu: Emulator = request.app[EMULATOR_KEY]
    if (denied := _http_check_key(request)) is not None:
        return denied
    try:
        voice = emu.voices.get(request.match_info["voice_id"])
    except VoiceNotFoundError:
        return _json_error(404, "voice_not_found", "voice not found")
    return web.json_response(voice.to_api())


async def handle_voice_clone(request: web.Request) -> web.Response:
    emu: Emulator = request.app[EMULATOR_KEY]
    if (denied := _http_check_key(request)) is not None:
        return denied
    if not request.content_type.startswith("multipart/"):
        return _json_error(400, "invalid_request", "send multipart/form-data with a clip file and a name")
    fields: dict[str, str] = {}
    clip: bytes | None = None
    reader = await request.multipart()
    while True:
        part = await reader.next()
        if part is None:
            break
        if not hasattr(part, "name") or not hasattr(part, "read"):
            continue
        name = part.name or ""
        data = await part.read(decode=False)  # type: ignore[union-attr]
        if name == "clip":
            clip = bytes(data)
        else:
            fields[name] = bytes(data).decode("utf-8", "replace")
    if not clip:
        return _json_error(400, "invalid_request", "missing required file field 'clip'")
    name = fields.get("name", "").strip()
    if not name:
        return _json_error(400, "invalid_request", "missing required field 'name'")
    voice = emu.voices.clone(
        name=name, clip=clip, language=fields.get("language", "en"), description=fields.get("description", "")
    )
    data = voice.to_api()
    data["user_id"] = "emulator"
    return web.json_response(data)


def setup_nineninesix_routes(app: web.Application) -> None:
    """Add the Nineninesix routes to the emulator's app (``app[EMULATOR_KEY]`` is the Emulator)."""
    app.router.add_get("/tts/websocket", handle_websocket)
    app.router.add_post("/tts/bytes", handle_bytes)
    app.router.add_post("/tts/sse", handle_sse)
    app.router.add_get("/voices", handle_voices_list)
    app.router.add_get("/voices/", handle_voices_list)
    app.router.add_post("/voices/clone", handle_voice_clone)
    app.router.add_get("/voices/{voice_id}", handle_voice_get)
