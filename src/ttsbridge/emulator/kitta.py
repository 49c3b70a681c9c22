"""Kitta Realtime TTS v2 endpoint of the emulator: ``GET /v2/tts/live`` (MessagePack over WebSocket).

Stands apart from the client (never imports ``ttsbridge.kitta``): its own validation, its own capability
matrix. What the public page leaves open (field ranges, error codes, close codes, units) is decided here and
written down in ``docs/kitta.md``; the short version:

* Handshake (HTTP answers before 101, JSON ``{error, message}``): ``token``/``api_key`` in the query -> 400
  ``api_key_in_url``; no ``realtime.tts.msgpack.v2`` subprotocol -> 400 ``subprotocol_required``; a bad
  ``Authorization: Bearer`` -> 401 ``unauthorized``; a key without realtime access -> 403 ``forbidden``;
  too many sessions -> 429 ``concurrency_limit`` (``Retry-After``); ``handshake_status`` knob -> that status.
* Without the header the first frame must be ``{event: "auth", token}`` within ``auth_timeout_s``.
* Session errors are an ``error {code, message, retryable, request_id?}`` event, then a close: 1008 for client
  mistakes, 1011 for retryable server failures, or the code the fault asks for.
* Formats ``pcm``, ``wav`` and ``mp3`` (the last two through PyAV: ``ttsbridge.emulator.encoders``); a key is
  any non-empty string unless ``KittaConfig.api_keys`` is set.
* Units are characters of a segment (leading/trailing whitespace and fault markers excluded); a segment is
  reserved at ``flush``, committed at its first audio frame, refunded if it fails (or the client leaves)
  before any audio.

Fault injection: :class:`KittaConfig` knobs, and in-band markers ``[[kitta:SPEC]]`` in the text (removed
before synthesis and billing). ``SPEC`` is ``error=CODE`` | ``close=CODE`` | ``error_after_audio`` |
``stall`` | ``delay=SECONDS`` followed by ``:``-separated flags ``retryable``, ``after_audio``, ``times=N``
(fire for the first N segments carrying that exact marker, so a client's retry of the same text can succeed).
``KittaConfig.session_faults`` is a FIFO of the same specs: each new session pops one and applies it to its
first segment (or, with flag ``at=start``, instead of ``ready``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any, Final

import msgpack
from aiohttp import WSMsgType, web

from ttsbridge.emulator.encoders import StreamEncoder, missing_codec, open_encoder
from ttsbridge.emulator.keys import key_accepted

__all__ = [
    "DEFAULT_KITTA_KEY",
    "KITTA_MODELS",
    "KITTA_PATH",
    "KITTA_SUBPROTOCOL",
    "KittaConfig",
    "KittaFault",
    "parse_kitta_fault",
    "setup_kitta_routes",
]

log = logging.getLogger("ttsbridge.emulator.kitta")

KITTA_PATH: Final = "/v2/tts/live"
KITTA_SUBPROTOCOL: Final = "realtime.tts.msgpack.v2"
#: The key ``KittaConfig.a_valid_key()`` hands out when ``api_keys`` is None (then any non-empty key works:
#: the page defines no key format).
DEFAULT_KITTA_KEY: Final = "kitta_emulator_test_key"

#: Capability matrix (optional ``start.request`` fields per model), from the page's "Site capabilities".
KITTA_MODELS: Final[dict[str, frozenset[str]]] = {
    "fishaudio-s21pro-flash": frozenset(
        {"speed", "volume", "language", "emotion", "chunk_length", "latency"}
    ),
    "minimax-speech": frozenset({"speed", "volume", "language", "emotion"}),
    "qwen-tts": frozenset({"language", "emotion", "instructions", "optimize_instructions"}),
}
_KNOWN_FORMATS: Final = ("pcm", "wav", "mp3", "opus")
_OPTIONAL: Final = (
    "speed",
    "volume",
    "language",
    "emotion",
    "chunk_length",
    "latency",
    "instructions",
    "optimize_instructions",
)
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
_EMOTION = re.compile(r"^[a-z][a-z_]{0,31}$")
_MARKER = re.compile(r"\[\[kitta:([^\]]*)\]\]")

# Close codes.
_CLOSE_NORMAL: Final = 1000
_CLOSE_POLICY: Final = 1008
_CLOSE_INTERNAL: Final = 1011


@dataclass
class KittaConfig:
    """Knobs of the Kitta endpoint. Read live: change ``emu.config.kitta.<knob>`` at any time.

    Attributes:
        auth_timeout_s: time allowed for the in-band ``auth`` frame when the handshake had no header.
        idle_timeout_s: error ``idle_timeout`` + close after this long without a client message while nothing
            is generating; None = never.
        api_keys: valid keys; None (the default) accepts any non-empty key (the page defines no key format).
        forbidden_keys: keys that authenticate but have no realtime access (HTTP 403 / ``forbidden``).
        sample_rate: native rate of the PCM output (24 kHz like the real models).
        chunk_ms: audio carried by one ``audio`` frame.
        first_chunk_latency_s: delay before the first audio frame of every segment.
        realtime_factor: 0 = no pacing; > 0 paces audio at that multiple of real time.
        handshake_delay_s: delay before answering the HTTP upgrade (a slow TLS/LB handshake).
        handshake_status: answer every upgrade with this HTTP status instead (e.g. 503); None = normal.
        retry_after_s: ``Retry-After`` sent with 429/503 handshake answers.
        max_concurrent_sessions: upgrades beyond this many open sessions get HTTP 429; None = unlimited.
        max_text_chars / max_segment_chars / max_session_units: the protocol limits.
        inband_faults: honour ``[[kitta:...]]`` markers in the text.
        session_faults: FIFO of fault specs; each new session pops one (see module docs).
        models: capability matrix (model -> optional fields it accepts).
        formats: output formats served: ``pcm``, and ``wav``/``mp3`` through PyAV (see
            ``ttsbridge.emulator.encoders``); ``opus`` is known but never served.
        max_message_bytes: largest client frame accepted.
        close_after_error: close the socket after an ``error`` event, as the page says; False emulates a
            server that forgets to (the client must still report the error at once).
    """

    auth_timeout_s: float = 5.0
    idle_timeout_s: float | None = 30.0
    api_keys: set[str] | None = field(default=None, repr=False)
    forbidden_keys: set[str] = field(default_factory=set, repr=False)
    sample_rate: int = 24_000
    chunk_ms: float = 40.0
    first_chunk_latency_s: float = 0.0
    realtime_factor: float = 0.0
    handshake_delay_s: float = 0.0
    handshake_status: int | None = None
    retry_after_s: float = 1.0
    max_concurrent_sessions: int | None = None
    max_text_chars: int = 2_000
    max_segment_chars: int = 10_000
    max_session_units: int = 100_000
    inband_faults: bool = True
    close_after_error: bool = True
    session_faults: list[str] = field(default_factory=list)
    models: dict[str, frozenset[str]] = field(default_factory=lambda: dict(KITTA_MODELS))
    formats: tuple[str, ...] = ("pcm", "wav", "mp3")
    max_message_bytes: int = 1 << 20

    def is_valid_key(self, key: str | None) -> bool:
        return key_accepted(self.api_keys, key)

    def a_valid_key(self) -> str:
        if self.api_keys is None:
            return DEFAULT_KITTA_KEY
        return sorted(self.api_keys)[0]

    def formats_note(self) -> str:
        """The formats that work here, for a start-up line (names a missing PyAV)."""
        usable = [f for f in self.formats if missing_codec(f) is None]
        missing = [f for f in self.formats if f not in usable]
        note = f"formats {', '.join(usable) or 'none'}"
        return f"{note}; {missing_codec(missing[0])}" if missing else note


# ------------------------------------------------------------------------------------------------- faults


@dataclass(frozen=True)
class KittaFault:
    """A parsed fault spec (see module docs)."""

    spec: str
    action: str  # error | close | stall | delay
    code: str = "internal_error"
    close_code: int = _CLOSE_INTERNAL
    retryable: bool = False
    after_audio: bool = False
    times: int | None = None
    delay_s: float = 0.0
    at: str = "flush"  # flush | start


def parse_kitta_fault(spec: str) -> KittaFault:
    """Parse ``error=CODE[:retryable][:after_audio][:times=N]``, ``close=CODE[...]``, ``error_after_audio``,
    ``stall``, ``delay=SECONDS``. Raises ValueError on anything else."""
    parts = [p.strip() for p in spec.strip().split(":") if p.strip()]
    if not parts:
        raise ValueError("empty fault spec")
    head, _, value = parts[0].partition("=")
    kw: dict[str, Any] = {"spec": spec}
    if head == "error_after_audio":
        kw.update(action="error", code="internal_error", retryable=True, after_audio=True)
    elif head == "error":
        if not value:
            raise ValueError("error=CODE needs a code")
        kw.update(action="error", code=value)
    elif head == "close":
        code = int(value) if value else _CLOSE_INTERNAL
        if not (code == 1000 or 1001 <= code <= 1014 or 3000 <= code <= 4999) or code in (1004, 1005, 1006):
            raise ValueError(f"close code {code} cannot be sent")
        kw.update(action="close", close_code=code)
    elif head == "stall":
        kw.update(action="stall")
    elif head == "delay":
        kw.update(action="delay", delay_s=float(value or "1"))
    else:
        raise ValueError(f"unknown fault action {head!r}")
    for flag in parts[1:]:
        name, _, val = flag.partition("=")
        if name == "retryable":
            kw["retryable"] = True
        elif name == "after_audio":
            kw["after_audio"] = True
        elif name == "times":
            kw["times"] = int(val)
        elif name == "at":
            if val not in ("flush", "start"):
                raise ValueError(f"at={val!r}: allowed flush, start")
            kw["at"] = val
        else:
            raise ValueError(f"unknown fault flag {name!r}")
    return KittaFault(**kw)


class _SessionError(Exception):
    """Send an error event, then close."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, close_code: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.close_code = (
            close_code if close_code is not None else (_CLOSE_INTERNAL if retryable else _CLOSE_POLICY)
        )


# ---------------------------------------------------------------------------------------------- the session


@dataclass
class _Segment:
    index: int
    text: str  # markers removed
    units: int
    faults: list[KittaFault]
    committed: bool = False
    refunded: bool = False


_STOP: Final = object()


class _Endpoint:
    """Route state shared by every session of one emulator."""

    def __init__(self, emulator: Any) -> None:
        self.emulator = emulator
        self.used_request_ids: dict[str, set[str]] = {}
        self.marker_hits: dict[str, int] = {}
        self.active = 0
        self.sessions: set[_Session] = set()

    @property
    def config(self) -> KittaConfig:
        cfg = getattr(getattr(self.emulator, "config", None), "kitta", None)
        return cfg if isinstance(cfg, KittaConfig) else KittaConfig()

    @property
    def stats(self) -> Any:
        return self.emulator.stats

    def notify(self) -> None:
        """Wake the emulator's ``wait_until`` waiters (stats changed)."""
        notify = getattr(self.emulator, "notify", None)
        if callable(notify):
            notify()

    def fault_fires(self, fault: KittaFault, key: str) -> bool:
        if fault.times is None:
            return True
        hits = self.marker_hits.get(key, 0)
        if hits >= fault.times:
            return False
        self.marker_hits[key] = hits + 1
        return True

    async def voice_ok(self, voice_id: str) -> bool:
        registry = getattr(self.emulator, "voices", None)
        if registry is not None and hasattr(registry, "__contains__") and hasattr(registry, "synthesize"):
            return voice_id in registry
        from ttsbridge.emulator import voices

        if voice_id == voices.TONE_VOICE_ID:
            return True
        return voice_id == voices.SPEECH_VOICE_ID and voices.speech_available()

    async def synthesize(self, voice_id: str, text: str, sample_rate: int) -> bytes:
        registry = getattr(self.emulator, "voices", None)
        if registry is not None and hasattr(registry, "synthesize"):
            return await registry.synthesize(voice_id, text, sample_rate)
        from ttsbridge.emulator import voices

        return await voices.synthesize(voice_id, text, sample_rate)

    # ---------------------------------------------------------------------------------------------- handler

    async def handle(self, request: web.Request) -> web.StreamResponse:
        stats = self.stats
        cfg = self.config
        stats.kitta_handshakes += 1
        stats.kitta_handshake_urls.append(request.path_qs)
        self.notify()
        if cfg.handshake_delay_s > 0:
            await asyncio.sleep(cfg.handshake_delay_s)
        query_keys = {k.lower() for k in request.query}
        if query_keys & {"token", "api_key", "apikey", "key"}:
            return self._reject(
                400,
                "api_key_in_url",
                "API keys are never accepted in the URL; use the Authorization header or the auth frame",
            )
        ws = web.WebSocketResponse(
            protocols=(KITTA_SUBPROTOCOL,), autoping=True, heartbeat=None, max_msg_size=cfg.max_message_bytes
        )
        ready = ws.can_prepare(request)
        if not ready.ok:
            return self._reject(400, "websocket_required", "this endpoint only speaks WebSocket")
        if ready.protocol != KITTA_SUBPROTOCOL:
            return self._reject(
                400, "subprotocol_required", f"request the WebSocket subprotocol {KITTA_SUBPROTOCOL}"
            )
        if cfg.handshake_status is not None:
            return self._reject(cfg.handshake_status, "unavailable", "handshake rejected (emulator knob)")
        header_key: str | None = None
        auth_header = request.headers.get("Authorization")
        if auth_header is not None:
            scheme, _, token = auth_header.partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not cfg.is_valid_key(token):
                return self._reject(401, "unauthorized", "invalid API key")
            if token in cfg.forbidden_keys:
                return self._reject(403, "forbidden", "this key has no access to Realtime TTS")
            header_key = token
        if cfg.max_concurrent_sessions is not None and self.active >= cfg.max_concurrent_sessions:
            return self._reject(429, "concurrency_limit", "too many concurrent sessions")
        await ws.prepare(request)
        stats.kitta_connections += 1
        stats.kitta_auth_modes.append("header" if header_key else "frame")
        stats.kitta_events.append((time.monotonic(), "connect"))
        session = _Session(self, request, ws, header_key)
        self.active += 1
        stats.kitta_open = self.active
        self.sessions.add(session)
        register = getattr(self.emulator, "register_connection", None)
        if callable(register):
            register(session)
        self.notify()
        try:
            await session.run()
        finally:
            self.active -= 1
            stats.kitta_open = self.active
            self.sessions.discard(session)
            unregister = getattr(self.emulator, "unregister_connection", None)
            if callable(unregister):
                unregister(session)
            self.notify()
        return ws

    def _reject(self, status: int, code: str, message: str) -> web.Response:
        self.stats.kitta_rejected_handshakes.append(status)
        self.notify()
        headers = {}
        if status in (429, 503):
            headers["Retry-After"] = f"{max(0, math.ceil(self.config.retry_after_s))}"
        return web.json_response({"error": code, "message": message}, status=status, headers=headers)


class _Session:
    def __init__(
        self, endpoint: _Endpoint, request: web.Request, ws: web.WebSocketResponse, header_key: str | None
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
        self.sample_rate = self.cfg.sample_rate
        self.buffer: list[str] = []
        self.buffer_chars = 0
        self.units_reserved = 0  # reserved or committed, for the session limit
        self.units_committed = 0
        self.queue: asyncio.Queue[Any] = asyncio.Queue()
        self.worker: asyncio.Task[None] | None = None
        self.busy = False
        self.seq = 0
        self.segments = 0
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
        transport = self.request.transport
        if transport is not None:
            transport.abort()
        self.stats.kitta_drops += 1
        self.ep.notify()

    async def shutdown(self, code: int = 1001, reason: str = "server shutting down") -> None:
        await self.close(code, reason)

    # --------------------------------------------------------------------------------------------- sending

    async def send(self, obj: dict[str, Any]) -> None:
        if self.closing or self.ws.closed:
            return
        async with self.send_lock:
            await self.ws.send_bytes(msgpack.packb(obj, use_bin_type=True))

    async def fail(self, err: _SessionError) -> None:
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
        self.stats.kitta_errors.append(err.code)
        self.stats.kitta_events.append((time.monotonic(), "error"))
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
        self.stats.kitta_server_closes.append(code)
        self.ep.notify()
        with contextlib.suppress(Exception):
            await self.ws.close(code=code, message=reason.encode()[:120])

    # ----------------------------------------------------------------------------------------------- main

    async def run(self) -> None:
        try:
            if self.state == "authenticated":
                await self.send({"event": "authenticated"})
            await self._loop()
        except _SessionError as err:
            await self.fail(err)
        finally:
            if self.worker is not None and not self.worker.done():
                self.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self.worker
            if not self.finished and not self.closing:
                self.stats.kitta_client_closes += 1
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
            if isinstance(item, _Segment):
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
                    raise _SessionError(
                        "auth_timeout", "no auth frame before the authentication timeout"
                    ) from None
                if self.busy or not self.queue.empty():
                    last_activity = time.monotonic()
                    continue
                raise _SessionError(
                    "idle_timeout", "no client message for too long", close_code=_CLOSE_NORMAL
                ) from None
            last_activity = time.monotonic()
            if msg.type == WSMsgType.BINARY:
                await self._on_frame(msg.data)
            elif msg.type == WSMsgType.TEXT:
                raise _SessionError("invalid_message", "messages must be MessagePack binary frames")
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return

    async def _on_frame(self, data: bytes) -> None:
        try:
            obj = msgpack.unpackb(data, raw=False)
        except Exception:
            raise _SessionError("invalid_message", "frame is not valid MessagePack") from None
        if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
            raise _SessionError("invalid_message", "frame must be a map with a string 'event'")
        event = obj["event"]
        handler = {
            "auth": self._on_auth,
            "start": self._on_start,
            "text": self._on_text,
            "flush": self._on_flush,
            "stop": self._on_stop,
        }.get(event)
        if handler is None:
            raise _SessionError("invalid_message", f"unknown event {event!r}")
        if self.state == "auth" and event != "auth":
            raise _SessionError("unauthorized", "authenticate first (Authorization header or auth frame)")
        await handler(obj)

    @staticmethod
    def _strict(obj: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
        unknown = sorted(str(k) for k in obj if k not in allowed)
        if unknown:
            raise _SessionError("unsupported_parameter", f"unknown field {unknown[0]!r} in {where}")

    async def _on_auth(self, obj: dict[str, Any]) -> None:
        if self.state != "auth":
            raise _SessionError("invalid_state", "already authenticated")
        self._strict(obj, ("event", "token"), "auth")
        token = obj.get("token")
        if not isinstance(token, str) or not self.cfg.is_valid_key(token):
            raise _SessionError("unauthorized", "invalid API key")
        if token in self.cfg.forbidden_keys:
            raise _SessionError("forbidden", "this key has no access to Realtime TTS")
        self.account = token
        self.state = "authenticated"
        await self.send({"event": "authenticated"})

    async def _on_start(self, obj: dict[str, Any]) -> None:
        if self.state != "authenticated":
            raise _SessionError("invalid_state", f"start is not allowed now (state {self.state})")
        self._strict(obj, ("event", "request_id", "request"), "start")
        request_id = obj.get("request_id")
        if not isinstance(request_id, str) or not 1 <= len(request_id) <= 128:
            raise _SessionError("invalid_parameter", "request_id must be a string of 1-128 characters")
        req = obj.get("request")
        if not isinstance(req, dict):
            raise _SessionError("invalid_parameter", "request must be a map")
        await self._validate_request(req)
        used = self.ep.used_request_ids.setdefault(self.account or "", set())
        if request_id in used:
            raise _SessionError("invalid_state", "request_id was already used for another session")
        used.add(request_id)
        self.request_id = request_id
        self.voice_id = req["voice_id"]
        self.format = req["format"]
        self.encoder = open_encoder(self.format, self.sample_rate)
        self.stats.kitta_sessions += 1
        self.stats.kitta_request_ids.append(request_id)
        self.stats.kitta_events.append((time.monotonic(), "start"))
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
        await self.send({"event": "ready", "request_id": request_id, **self._audio_fields()})
        self.worker = asyncio.create_task(self._work(), name=f"kitta-emulator-{request_id}")

    async def _validate_request(self, req: dict[str, Any]) -> None:
        cfg = self.ep.config
        self._strict(req, ("voice_id", "model", "format", *_OPTIONAL), "request")
        for name in ("voice_id", "model", "format"):
            if not isinstance(req.get(name), str) or not req[name]:
                raise _SessionError("invalid_parameter", f"request.{name} is required (a non-empty string)")
        model = req["model"]
        if model not in cfg.models:
            raise _SessionError("model_not_found", f"model {model!r} does not exist")
        fmt = req["format"]
        if fmt not in _KNOWN_FORMATS:
            raise _SessionError("unsupported_parameter", f"format {fmt!r} is not supported")
        if fmt not in cfg.formats:
            raise _SessionError("unsupported_parameter", f"format {fmt!r} is not available on this server")
        problem = missing_codec(fmt)
        if problem:
            raise _SessionError("unsupported_parameter", problem)
        supported = cfg.models[model]
        for name in _OPTIONAL:
            if name in req and name not in supported:
                raise _SessionError("unsupported_parameter", f"model {model!r} does not support {name!r}")
        _check_values(req)
        if not await self.ep.voice_ok(req["voice_id"]):
            raise _SessionError("voice_not_found", "voice_id does not exist or does not support this model")

    async def _on_text(self, obj: dict[str, Any]) -> None:
        self._require_ready("text")
        self._strict(obj, ("event", "text"), "text")
        text = obj.get("text")
        if not isinstance(text, str):
            raise _SessionError("invalid_parameter", "text must be a string")
        cfg = self.ep.config
        if len(text) > cfg.max_text_chars:
            raise _SessionError(
                "text_too_long", f"a text event holds at most {cfg.max_text_chars} characters"
            )
        if self.buffer_chars + len(text) > cfg.max_segment_chars:
            raise _SessionError(
                "segment_too_long", f"a flushed segment holds at most {cfg.max_segment_chars} characters"
            )
        self.buffer.append(text)
        self.buffer_chars += len(text)
        if self.request_id is not None:
            self.stats.mark_request(self.request_id, text)

    async def _on_flush(self, obj: dict[str, Any]) -> None:
        self._require_ready("flush")
        self._strict(obj, ("event",), "flush")
        self._cut_segment()

    async def _on_stop(self, obj: dict[str, Any]) -> None:
        self._require_ready("stop")
        self._strict(obj, ("event",), "stop")
        self._cut_segment()
        self.state = "stopping"
        self.queue.put_nowait(_STOP)

    def _require_ready(self, event: str) -> None:
        if self.state != "ready":
            raise _SessionError("invalid_state", f"{event} is not allowed now (state {self.state})")

    def _cut_segment(self) -> None:
        raw = "".join(self.buffer)
        self.buffer.clear()
        self.buffer_chars = 0
        faults: list[KittaFault] = []
        if self.ep.config.inband_faults:
            for m in _MARKER.finditer(raw):
                try:
                    fault = parse_kitta_fault(m.group(1))
                except ValueError as exc:
                    log.warning("kitta emulator: ignoring bad marker %r: %s", m.group(0), exc)
                    continue
                if self.ep.fault_fires(fault, m.group(1)):
                    faults.append(fault)
            raw = _MARKER.sub("", raw)
        text = raw.strip()
        if not text and not faults:
            return  # an empty flush is not a segment: nothing billed, no usage
        if self.session_fault is not None:
            faults.insert(0, self.session_fault)
            self.session_fault = None
        units = len(text)
        cfg = self.ep.config
        if self.units_reserved + units > cfg.max_session_units:
            raise _SessionError(
                "quota_exceeded", f"the session would exceed {cfg.max_session_units} billable units"
            )
        self.units_reserved += units
        seg = _Segment(index=self.segments, text=text, units=units, faults=faults)
        self.segments += 1
        self.stats.kitta_segments += 1
        self.stats.kitta_segment_texts.append(text)
        self.ep.notify()
        self.queue.put_nowait(seg)

    # ---------------------------------------------------------------------------------------------- worker

    async def _work(self) -> None:
        try:
            while True:
                item = await self.queue.get()
                if item is _STOP:
                    await self.send(
                        {"event": "finish", "request_id": self.request_id, "units": self.units_committed}
                    )
                    self.finished = True
                    self.stats.kitta_finished += 1
                    self.ep.notify()
                    await self.close(_CLOSE_NORMAL, "finished")
                    return
                self.busy = True
                try:
                    ok = await self._render(item)
                finally:
                    self.busy = False
                if not ok:
                    return
        except _SessionError as err:
            await self.fail(err)

    async def _apply(self, fault: KittaFault) -> None:
        if fault.action == "error":
            await self.fail(
                _SessionError(
                    fault.code,
                    f"injected fault ({fault.code})",
                    retryable=fault.retryable,
                    close_code=_CLOSE_INTERNAL if fault.retryable else _CLOSE_POLICY,
                )
            )
        elif fault.action == "close":
            await self.close(fault.close_code, "injected close")
        elif fault.action == "stall":
            await asyncio.Event().wait()  # until the session ends (the worker is cancelled)

    def _refund(self, seg: _Segment) -> None:
        if not seg.committed and not seg.refunded:
            seg.refunded = True
            self.units_reserved -= seg.units
            self.stats.kitta_units_refunded += seg.units
            self.stats.kitta_segments_refunded += 1
            self.ep.notify()

    def _audio_fields(self) -> dict[str, Any]:
        """``sample_rate``/``channels`` (+ ``bit_depth`` for the PCM formats) of ``ready`` and ``audio``."""
        fields: dict[str, Any] = {"sample_rate": self.sample_rate, "channels": 1}
        if self.format in ("pcm", "wav"):
            fields["bit_depth"] = 16
        return fields

    async def _send_audio(self, seg: _Segment, data: bytes, after: list[KittaFault]) -> bool:
        """One ``audio`` frame; commits the segment at its first frame. False if an after-audio fault ended
        the session."""
        await self.send(
            {
                "event": "audio",
                "request_id": self.request_id,
                "seq": self.seq,
                "audio": data,
                **self._audio_fields(),
            }
        )
        self.seq += 1
        self.stats.kitta_audio_frames += 1
        if self.request_id is not None:
            self.stats.mark_chunk(self.request_id)
        self.ep.notify()
        if not seg.committed:
            seg.committed = True
            self.units_committed += seg.units
            self.stats.kitta_units_committed += seg.units
            if after:
                await self._apply(after[0])
                return False
        return True

    async def _stream(self, seg: _Segment, pcm: bytes, after: list[KittaFault]) -> bool:
        """Encode ``pcm`` frame by frame, send what the encoder yields, flush it at the segment's end."""
        cfg = self.ep.config
        encoder = self.encoder or open_encoder("pcm", self.sample_rate)
        step = max(2, int(self.sample_rate * cfg.chunk_ms / 1000.0) * 2)
        for offset in range(0, len(pcm), step):
            frame = pcm[offset : offset + step]
            data = encoder.encode(frame)
            if data and not await self._send_audio(seg, data, after):
                return False
            rf = self.ep.config.realtime_factor
            if rf > 0:
                await asyncio.sleep(len(frame) / 2 / self.sample_rate / rf)
        tail = encoder.end_segment()
        return not tail or await self._send_audio(seg, tail, after)

    async def _render(self, seg: _Segment) -> bool:
        cfg = self.ep.config
        before = [f for f in seg.faults if not f.after_audio and f.action != "delay"]
        after = [f for f in seg.faults if f.after_audio and f.action in ("error", "close")]
        delay = sum(f.delay_s for f in seg.faults if f.action == "delay")
        try:
            if before:
                self._refund(seg)
                await self._apply(before[0])
                return False
            pcm = await self.ep.synthesize(self.voice_id, seg.text, self.sample_rate) if seg.text else b""
            if cfg.first_chunk_latency_s + delay > 0:
                await asyncio.sleep(cfg.first_chunk_latency_s + delay)
            if not await self._stream(seg, pcm, after):
                return False
            if not pcm and seg.units:
                # nothing to say (e.g. punctuation only): generated, committed with its units
                seg.committed = True
                self.units_committed += seg.units
                self.stats.kitta_units_committed += seg.units
            await self.send(
                {
                    "event": "usage",
                    "request_id": self.request_id,
                    "units": seg.units,
                    "total_units": self.units_committed,
                }
            )
            return True
        finally:
            # failed, cancelled (the client left) or closed before any audio: nothing was delivered
            self._refund(seg)


def _check_values(req: dict[str, Any]) -> None:
    def bad(name: str, allowed: str) -> _SessionError:
        return _SessionError(
            "invalid_parameter", f"request.{name}={req[name]!r} is invalid; allowed: {allowed}"
        )

    def number(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if "speed" in req and not (number(req["speed"]) and 0.5 <= req["speed"] <= 2.0):
        raise bad("speed", "0.5..2.0")
    if "volume" in req and not (number(req["volume"]) and -20 <= req["volume"] <= 20):
        raise bad("volume", "-20..20")
    if "language" in req and not (isinstance(req["language"], str) and _LANGUAGE.match(req["language"])):
        raise bad("language", "a language tag such as 'en'")
    if "emotion" in req and not (isinstance(req["emotion"], str) and _EMOTION.match(req["emotion"])):
        raise bad("emotion", "a lowercase word")
    if "chunk_length" in req and not (
        isinstance(req["chunk_length"], int)
        and not isinstance(req["chunk_length"], bool)
        and 100 <= req["chunk_length"] <= 300
    ):
        raise bad("chunk_length", "an int 100..300")
    if "latency" in req and req["latency"] not in ("normal", "balanced"):
        raise bad("latency", "'normal' or 'balanced'")
    if "instructions" in req and not (
        isinstance(req["instructions"], str) and 1 <= len(req["instructions"]) <= 1000
    ):
        raise bad("instructions", "a string of 1..1000 characters")
    if "optimize_instructions" in req and not isinstance(req["optimize_instructions"], bool):
        raise bad("optimize_instructions", "a bool")


_ENDPOINT_KEY: Final = web.AppKey("kitta_endpoint", _Endpoint)

_STAT_DEFAULTS: Final[dict[str, Any]] = {
    "kitta_handshakes": 0,
    "kitta_handshake_urls": list,
    "kitta_rejected_handshakes": list,
    "kitta_connections": 0,
    "kitta_auth_modes": list,
    "kitta_sessions": 0,
    "kitta_request_ids": list,
    "kitta_segments": 0,
    "kitta_segment_texts": list,
    "kitta_segments_refunded": 0,
    "kitta_units_committed": 0,
    "kitta_units_refunded": 0,
    "kitta_audio_frames": 0,
    "kitta_errors": list,
    "kitta_server_closes": list,
    "kitta_client_closes": 0,
    "kitta_finished": 0,
    "kitta_drops": 0,
    "kitta_open": 0,  # Kitta WebSocket connections open now
    "kitta_events": list,  # (time.monotonic(), "connect" | "start" | "error"), in order
}


def _ensure_stats(stats: Any) -> None:
    for name, default in _STAT_DEFAULTS.items():
        if not hasattr(stats, name):
            setattr(stats, name, default() if callable(default) else default)


def setup_kitta_routes(app: web.Application, emulator: Any) -> None:
    """Add ``/v2/tts/live`` to the emulator's app. ``emulator`` is the running Emulator (``config.kitta``,
    ``stats``, optionally ``voices``). Counters are added to ``emulator.stats`` as ``kitta_*`` attributes."""
    _ensure_stats(emulator.stats)
    endpoint = _Endpoint(emulator)
    app[_ENDPOINT_KEY] = endpoint
    app.router.add_get(KITTA_PATH, endpoint.handle)

    async def _close_sessions(_app: web.Application) -> None:
        for session in list(endpoint.sessions):
            await session.close(1001, "server shutdown")

    app.on_shutdown.append(_close_sessions)
