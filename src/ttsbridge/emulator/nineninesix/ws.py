"""The Nineninesix WebSocket ``/tts/websocket``: one connection's contexts, cancels, rendering and faults."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web

from ttsbridge.emulator.connlog import RecordedWebSocket
from ttsbridge.emulator.nineninesix.config import MODEL_ID
from ttsbridge.emulator.nineninesix.faults import Fault, error_spec, parse_inband, ws_close_code
from ttsbridge.emulator.nineninesix.outbox import Context, Item, Out, Outbox
from ttsbridge.emulator.nineninesix.render import Renderer
from ttsbridge.emulator.nineninesix.wire import (
    EMULATOR_KEY,
    TRUE_WORDS,
    OutputFormat,
    api_key_of,
    done_frame,
    error_frame,
    json_error,
    parse_output_format,
    voice_of,
)

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

__all__ = ["handle_websocket"]

log = logging.getLogger("ttsbridge.emulator")
_DEAD_IDS_KEPT = 4096


class _WSConnection(Renderer):
    def __init__(self, emu: EmulatorHost, request: web.Request, ws: RecordedWebSocket, number: int) -> None:
        self.emu = emu
        self.request = request
        self.ws = ws
        self.number = number
        self.cancel_ack = request.query.get("cancel_ack", "").strip().lower() in TRUE_WORDS
        self.outbox = Outbox()
        self.contexts: dict[str, Context] = {}
        self.dead: dict[str, None] = {}
        self.output_format: OutputFormat | None = None
        self.model_checked = False
        self.closing = False
        self.aborted = False

    # -- plumbing

    def abort(self) -> None:
        """Cut the TCP connection now, no close frame (a dead network)."""
        if self.aborted:
            return
        self.aborted = True
        self.closing = True
        self.outbox.closed = True
        self.ws.mark_dropped()
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        self.emu.stats.nineninesix.drops += 1
        self.emu.notify()

    async def shutdown(self, code: int = 1001, reason: str = "server shutting down") -> None:
        await self._close(code, reason)

    async def _send(self, frame: dict[str, Any], *, chunk_of: str | None = None, wait: bool = True) -> None:
        await self.outbox.put(Out("frame", frame=frame, context_id=chunk_of), wait=wait)

    async def _close(self, code: int, reason: str = "") -> None:
        if self.closing:
            return
        self.closing = True
        await self.outbox.put(Out("close", code=code, reason=reason), wait=False)

    async def _writer(self) -> None:
        stats = self.emu.stats.nineninesix
        try:
            while True:
                out = await self.outbox.get()
                if out.kind == "frame":
                    assert out.frame is not None
                    await self.ws.send_str(json.dumps(out.frame))
                    if out.context_id is not None:
                        stats.chunks_sent += 1
                        stats.timings.mark_chunk(out.context_id)
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
                        self.emu.stats.nineninesix.messages.append((self.number, {"<binary>": len(msg.data)}))
                        await self._send(
                            error_frame(
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
        stats = self.emu.stats.nineninesix
        try:
            msg = json.loads(data)
        except ValueError:
            stats.messages.append((self.number, {"<invalid json>": data[:200]}))
            self.emu.notify()
            await self._send(error_frame(error_spec("invalid_request"), None, "message is not valid JSON"))
            return
        if not isinstance(msg, dict):
            stats.messages.append((self.number, {"<not an object>": msg}))
            self.emu.notify()
            await self._send(
                error_frame(error_spec("invalid_request"), None, "message must be a JSON object")
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
        stats = self.emu.stats.nineninesix
        stats.cancels += 1
        ctx_id = msg.get("context_id")
        if not isinstance(ctx_id, str) or not ctx_id:
            if self.cancel_ack:
                await self._send(error_frame(error_spec("missing_context_id"), None), wait=False)
            return
        ctx = self.contexts.get(ctx_id)
        if ctx is None:
            if self.cancel_ack:
                await self._send(error_frame(error_spec("context_not_found"), ctx_id), wait=False)
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
            await self._send(done_frame(ctx_id, cancelled=True), wait=False)

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
        await self._send(error_frame(spec, context_id, message), wait=False)
        self.emu.stats.nineninesix.contexts_failed += len(self.contexts)
        await self._close(ws_close_code(spec), spec.code)

    def _refund(self, ctx: Context) -> None:
        for item in ctx.items:
            if not item.settled:
                item.settled = True
                self.emu.refund(item.chars)

    def _forget(self, ctx: Context, *, dead: bool = False) -> None:
        if self.contexts.get(ctx.id) is ctx:
            del self.contexts[ctx.id]
            self.emu.release_slot()
        if dead:
            self._mark_dead(ctx.id)

    def _mark_dead(self, context_id: str) -> None:
        self.dead[context_id] = None
        while len(self.dead) > _DEAD_IDS_KEPT:
            self.dead.pop(next(iter(self.dead)))

    async def _fail_context(self, ctx: Context, code: str, message: str | None = None) -> None:
        """A context-ending error (``generation_failed``...): the error frame, refunds, the id dies."""
        if ctx.task is not None and ctx.task is not asyncio.current_task() and not ctx.task.done():
            ctx.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ctx.task
        self._refund(ctx)
        self.outbox.purge(ctx.id)
        self._forget(ctx, dead=True)
        self.emu.stats.nineninesix.contexts_failed += 1
        self.emu.notify()
        await self._send(error_frame(error_spec(code), ctx.id, message), wait=False)

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
                await self._send(error_frame(error_spec("invalid_request"), raw_id, text), wait=False)
            return
        cont = msg.get("continue", False) is True

        voice_id = await self._gateway(msg, ctx_id)
        if voice_id is None:
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
            ctx = await self._open_context(ctx_id, transcript)
            if ctx is None:
                return

        if has_work:
            chars = len(text)
            if chars and not emu.charge(chars):
                await self._fail_connection(
                    "insufficient_credits", ctx_id, f"insufficient credits for {chars} characters"
                )
                return
            fault = inband if inband is not None else emu.faults.match(transcript)
            item = Item(text, chars, voice_id, fault)
            ctx.items.append(item)
            ctx.pending.append(item)
        if not cont:
            ctx.ended = True
        ctx.wakeup.set()

    async def _gateway(self, msg: dict[str, Any], ctx_id: str) -> str | None:
        """The gateway's checks: the model on the connection's first request, the format from the first request
        carrying one, then the voice. Returns the voice id, or None when the connection was failed."""
        if not self.model_checked:
            self.model_checked = True
            model = msg.get("model_id")
            if model is not None and model != MODEL_ID:
                await self._fail_connection(
                    "unknown_model", ctx_id, f"unknown model_id {model!r}; use {MODEL_ID!r}"
                )
                return None
        if self.output_format is None and msg.get("output_format") is not None:
            fmt, err, text = parse_output_format(msg["output_format"])
            if fmt is None:
                assert err is not None
                await self._fail_connection(err, ctx_id, text)
                return None
            self.output_format = fmt
        voice_id = voice_of(msg.get("voice"), self.emu.voices.default_voice_id)
        if voice_id not in self.emu.voices:
            await self._fail_connection("voice_not_found", ctx_id, f"voice {voice_id!r} not found")
            return None
        return voice_id

    async def _open_context(self, ctx_id: str, transcript: str) -> Context | None:
        """A new context with its render task, or None (refused by the concurrency limit, the id dies)."""
        emu = self.emu
        if not emu.acquire_slot():
            emu.stats.nineninesix.contexts_rejected += 1
            self._mark_dead(ctx_id)
            emu.notify()
            await self._send(error_frame(error_spec("concurrent_limit"), ctx_id), wait=False)
            return None
        ctx = Context(ctx_id)
        self.contexts[ctx_id] = ctx
        emu.stats.nineninesix.contexts_started += 1
        emu.stats.nineninesix.timings.mark_request(ctx_id, transcript)
        ctx.task = asyncio.create_task(self._render_context(ctx))
        emu.notify()
        return ctx


async def handle_websocket(request: web.Request) -> web.StreamResponse:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    key = api_key_of(request, allow_query=True)
    if not emu.config.is_valid_key(key):
        emu.stats.nineninesix.ws_rejected += 1
        emu.notify()
        return json_error(401, "unauthorized", "missing or invalid API key")
    ws = RecordedWebSocket(
        emu.stats.connections,
        "nineninesix",
        emu.notify,
        timeout=5.0,
        autoping=True,
        max_msg_size=4 * 1024 * 1024,
    )
    await ws.prepare(request)
    conn = _WSConnection(emu, request, ws, emu.next_connection_number())
    emu.stats.nineninesix.ws_connections += 1
    emu.stats.nineninesix.ws_open += 1
    emu.register_connection(conn)
    emu.notify()
    try:
        await conn.run()
    finally:
        emu.unregister_connection(conn)
        emu.stats.nineninesix.ws_open -= 1
        ws.finish()
        emu.notify()
    return ws
