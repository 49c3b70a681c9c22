"""One Kitta WebSocket session: auth, start, text/flush/stop frames (the worker is in ``render``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

import msgpack
from aiohttp import WSMsgType, web

from ttsbridge.emulator.encoders import StreamEncoder, missing_codec, open_encoder
from ttsbridge.emulator.kitta.config import CLOSE_NORMAL, KNOWN_FORMATS, MARKER, OPTIONAL_FIELDS
from ttsbridge.emulator.kitta.faults import KittaFault, parse_kitta_fault
from ttsbridge.emulator.kitta.render import STOP, Renderer, Segment
from ttsbridge.emulator.kitta.validate import SessionError, check_values
from ttsbridge.emulator.pacing import Pacer

if TYPE_CHECKING:
    from ttsbridge.emulator.kitta.endpoint import Endpoint

log = logging.getLogger("ttsbridge.emulator.kitta")


class Session(Renderer):
    """One Kitta WebSocket: its state machine (auth -> authenticated -> ready -> stopping), frames and billing."""

    def __init__(
        self, endpoint: Endpoint, request: web.Request, ws: web.WebSocketResponse, header_key: str | None
    ) -> None:
        self.ep = endpoint
        self.request = request
        self.cfg = endpoint.config
        self.stats = endpoint.stats
        self.ws = ws
        self.account = header_key
        self.state = "authenticated" if header_key else "auth"
        self.request_id: str | None = None
        self.voice_id = ""
        self.format = "pcm"
        self.encoder: StreamEncoder | None = None
        self.audio_fields: dict[str, Any] = {}  # set at start
        self.sample_rate = self.cfg.sample_rate
        self.buffer: list[str] = []
        self.buffer_chars = 0
        self.units_reserved = 0  # reserved or committed, for the session limit
        self.units_committed = 0
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None
        self.busy = False
        self.seq = 0
        self.pacer = Pacer()  # the session's audio clock (render.py)
        self.session_fault: KittaFault | None = None
        self.send_lock = asyncio.Lock()
        self.closing = False
        self.finished = False

    # ------------------------------------------------------------- the emulator's Connection protocol

    def abort(self) -> None:
        """Cut the TCP connection now, no close frame (a dead network)."""
        if self.closing:
            return
        self.closing = True
        mark = getattr(self.ws, "mark_dropped", None)
        if mark is not None:
            mark()
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        self.stats.drops += 1
        self.ep.notify()

    async def shutdown(self, code: int = 1001, reason: str = "server shutting down") -> None:
        await self.close(code, reason)

    # --------------------------------------------------------------------------------------------- sending

    async def send(self, obj: dict[str, Any]) -> None:
        if self.closing or self.ws.closed:
            return
        async with self.send_lock:
            await self.ws.send_bytes(msgpack.packb(obj, use_bin_type=True))

    async def fail(self, err: SessionError) -> None:
        if self.closing:
            return
        event: dict[str, Any] = {
            "event": "error",
            "code": err.code,
            "message": err.message,
            "retryable": err.retryable,
        }
        if self.request_id is not None:
            event["request_id"] = self.request_id
        self.stats.errors.append(err.code)
        self.stats.events.append((time.monotonic(), "error"))
        self.ep.notify()
        await self.send(event)
        if not self.cfg.close_after_error:
            # A server that forgets to close after an error: keep the socket open until the client leaves.
            with contextlib.suppress(Exception):
                async for _ in self.ws:
                    pass
            return
        await self.close(err.close_code, err.code)

    async def close(self, code: int, reason: str = "") -> None:
        if self.closing:
            return
        self.closing = True
        self.stats.server_closes.append(code)
        self.ep.notify()
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, message=reason.encode()[:120])

    # ----------------------------------------------------------------------------------------------- main

    async def run(self) -> None:
        try:
            if self.state == "authenticated":
                await self.send({"event": "authenticated"})
            await self._loop()
        except SessionError as err:
            await self.fail(err)
        finally:
            if self.worker is not None and not self.worker.done():
                self.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.worker
            if not self.finished and not self.closing:
                self.stats.client_closes += 1
            self._refund_pending()
            if self.encoder is not None:
                with contextlib.suppress(Exception):
                    self.encoder.close()
            self.ep.notify()
            if not self.ws.closed:
                with contextlib.suppress(Exception):
                    await self.ws.close()

    def _refund_pending(self) -> None:
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if isinstance(item, Segment):
                self._refund(item)

    async def _loop(self) -> None:
        auth_deadline = time.monotonic() + self.cfg.auth_timeout_s
        last_activity = time.monotonic()
        while not self.closing:
            cfg = self.ep.config
            if self.state == "auth":
                timeout: float | None = max(0.0, auth_deadline - time.monotonic())
            elif cfg.idle_timeout_s is not None:
                timeout = max(0.0, last_activity + cfg.idle_timeout_s - time.monotonic())
            else:
                timeout = None
            try:
                msg = await self.ws.receive(timeout=timeout)
            except asyncio.TimeoutError:
                if self.state == "auth":
                    raise SessionError(
                        "auth_timeout", "no auth frame before the authentication timeout"
                    ) from None
                if self.busy or not self.queue.empty():
                    last_activity = time.monotonic()
                    continue
                raise SessionError(
                    "idle_timeout", "no client message for too long", close_code=CLOSE_NORMAL
                ) from None
            last_activity = time.monotonic()
            if msg.type == WSMsgType.BINARY:
                await self._on_frame(msg.data)
            elif msg.type == WSMsgType.TEXT:
                raise SessionError("invalid_message", "messages must be MessagePack binary frames")
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return

    async def _on_frame(self, data: bytes) -> None:
        try:
            obj = msgpack.unpackb(data, raw=False)
        except Exception:
            raise SessionError("invalid_message", "frame is not valid MessagePack") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
            raise SessionError("invalid_message", "frame must be a map with a string 'event'")
        event = obj["event"]
        handler = self._HANDLERS.get(event)
        if handler is None:
            raise SessionError("invalid_message", f"unknown event {event!r}")
        if self.state == "auth" and event != "auth":
            raise SessionError("unauthorized", "authenticate first (Authorization header or auth frame)")
        await handler(self, obj)

    @staticmethod
    def _strict(obj: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
        unknown = sorted(str(k) for k in obj if k not in allowed)
        if unknown:
            raise SessionError("unsupported_parameter", f"unknown field {unknown[0]!r} in {where}")

    async def _on_auth(self, obj: dict[str, Any]) -> None:
        if self.state != "auth":
            raise SessionError("invalid_state", "already authenticated")
        self._strict(obj, ("event", "token"), "auth")
        token = obj.get("token")
        if not isinstance(token, str) or not self.cfg.is_valid_key(token):
            raise SessionError("unauthorized", "invalid API key")
        if token in self.cfg.forbidden_keys:
            raise SessionError("forbidden", "this key has no access to Realtime TTS")
        self.account = token
        self.state = "authenticated"
        await self.send({"event": "authenticated"})

    async def _on_start(self, obj: dict[str, Any]) -> None:
        if self.state != "authenticated":
            raise SessionError("invalid_state", f"start is not allowed now (state {self.state})")
        self._strict(obj, ("event", "request_id", "request"), "start")
        request_id = obj.get("request_id")
        if not isinstance(request_id, str) or not 1 <= len(request_id) <= 128:
            raise SessionError("invalid_parameter", "request_id must be a string of 1-128 characters")
        req = obj.get("request")
        if not isinstance(req, dict):
            raise SessionError("invalid_parameter", "request must be a map")
        await self._validate_request(req)
        used = self.ep.used_request_ids.setdefault(self.account or "", set())
        if request_id in used:
            raise SessionError("invalid_state", "request_id was already used for another session")
        used.add(request_id)
        self.request_id = request_id
        self.voice_id = req["voice_id"]
        self.format = req["format"]
        self.encoder = open_encoder(self.format, self.sample_rate)
        # ``sample_rate``/``channels`` (+ ``bit_depth`` for the PCM formats) of ``ready`` and every ``audio``
        self.audio_fields = {"sample_rate": self.sample_rate, "channels": 1}
        if self.format in ("pcm", "wav"):
            self.audio_fields["bit_depth"] = 16
        self.stats.sessions += 1
        self.stats.request_ids.append(request_id)
        self.stats.events.append((time.monotonic(), "start"))
        self.ep.notify()
        cfg = self.ep.config
        if cfg.session_faults:
            try:
                self.session_fault = parse_kitta_fault(cfg.session_faults.pop(0))
            except ValueError as exc:
                log.warning("kitta emulator: bad session fault: %s", exc)
        self.state = "ready"
        if self.session_fault is not None and self.session_fault.at == "start":
            fault, self.session_fault = self.session_fault, None
            if fault.action == "stall":
                self.state = "stalled"  # never ready; later events are out of order
            else:
                await self._apply(fault)
            return
        await self.send({"event": "ready", "request_id": request_id, **self.audio_fields})
        self.worker = asyncio.create_task(self._work(), name=f"kitta-emulator-{request_id}")

    async def _validate_request(self, req: dict[str, Any]) -> None:
        cfg = self.ep.config
        self._strict(req, ("voice_id", "model", "format", *OPTIONAL_FIELDS), "request")
        for name in ("voice_id", "model", "format"):
            if not isinstance(req.get(name), str) or not req[name]:
                raise SessionError("invalid_parameter", f"request.{name} is required (a non-empty string)")
        model = req["model"]
        if model not in cfg.models:
            raise SessionError("model_not_found", f"model {model!r} does not exist")
        fmt = req["format"]
        if fmt not in KNOWN_FORMATS:
            raise SessionError("unsupported_parameter", f"format {fmt!r} is not supported")
        if fmt not in cfg.formats:
            raise SessionError("unsupported_parameter", f"format {fmt!r} is not available on this server")
        problem = missing_codec(fmt)
        if problem:
            raise SessionError("unsupported_parameter", problem)
        supported = cfg.models[model]
        for name in OPTIONAL_FIELDS:
            if name in req and name not in supported:
                raise SessionError("unsupported_parameter", f"model {model!r} does not support {name!r}")
        check_values(req)
        if self.ep.emulator.voices.kitta_voice(req["voice_id"], model) is None:
            raise SessionError("voice_not_found", "voice_id does not exist or does not support this model")

    async def _on_text(self, obj: dict[str, Any]) -> None:
        self._require_ready("text")
        self._strict(obj, ("event", "text"), "text")
        text = obj.get("text")
        if not isinstance(text, str):
            raise SessionError("invalid_parameter", "text must be a string")
        cfg = self.ep.config
        if len(text) > cfg.max_text_chars:
            raise SessionError("text_too_long", f"a text event holds at most {cfg.max_text_chars} characters")
        if self.buffer_chars + len(text) > cfg.max_segment_chars:
            raise SessionError(
                "segment_too_long", f"a flushed segment holds at most {cfg.max_segment_chars} characters"
            )
        self.buffer.append(text)
        self.buffer_chars += len(text)
        if self.request_id is not None:
            self.stats.timings.mark_request(self.request_id, text)

    async def _on_flush(self, obj: dict[str, Any]) -> None:
        self._require_ready("flush")
        self._strict(obj, ("event",), "flush")
        self._cut_segment()

    async def _on_stop(self, obj: dict[str, Any]) -> None:
        self._require_ready("stop")
        self._strict(obj, ("event",), "stop")
        self._cut_segment()
        self.state = "stopping"
        self.queue.put_nowait(STOP)

    def _require_ready(self, event: str) -> None:
        if self.state != "ready":
            raise SessionError("invalid_state", f"{event} is not allowed now (state {self.state})")

    def _cut_segment(self) -> None:
        raw = "".join(self.buffer)
        self.buffer.clear()
        self.buffer_chars = 0
        faults: list[KittaFault] = []
        if self.ep.config.inband_faults:
            for m in MARKER.finditer(raw):
                try:
                    fault = parse_kitta_fault(m.group(1))
                except ValueError as exc:
                    log.warning("kitta emulator: ignoring bad marker %r: %s", m.group(0), exc)
                    continue
                if self.ep.fault_fires(fault, m.group(1)):
                    faults.append(fault)
            raw = MARKER.sub("", raw)
        text = raw.strip()
        if not text and not faults:
            return  # an empty flush is not a segment: nothing billed, no usage
        if self.session_fault is not None:
            faults.insert(0, self.session_fault)
            self.session_fault = None
        units = len(text)
        cfg = self.ep.config
        if self.units_reserved + units > cfg.max_session_units:
            raise SessionError(
                "quota_exceeded", f"the session would exceed {cfg.max_session_units} billable units"
            )
        self.units_reserved += units
        seg = Segment(text=text, units=units, faults=faults)
        self.stats.segments += 1
        self.stats.segment_texts.append(text)
        self.ep.notify()
        self.queue.put_nowait(seg)

    _HANDLERS: ClassVar[dict[str, Callable[[Session, dict[str, Any]], Awaitable[None]]]] = {
        "auth": _on_auth,
        "start": _on_start,
        "text": _on_text,
        "flush": _on_flush,
        "stop": _on_stop,
    }
