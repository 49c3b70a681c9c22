"""The Nineninesix HTTP TTS routes ``/tts/bytes`` and ``/tts/sse``."""

from __future__ import annotations

import asyncio
import json
import struct
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ttsbridge.emulator.nineninesix.config import MODEL_ID, NATIVE_SAMPLE_RATE
from ttsbridge.emulator.nineninesix.faults import Fault, error_spec, parse_inband
from ttsbridge.emulator.nineninesix.wire import (
    CONTAINERS_HTTP,
    CONTAINERS_WS,
    EMULATOR_KEY,
    OutputFormat,
    chunk_frame,
    error_frame,
    fault_label,
    http_check_key,
    http_error_for,
    json_error,
    parse_output_format,
    voice_of,
)
from ttsbridge.emulator.pacing import Pacer

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

__all__ = ["handle_bytes", "handle_sse"]


@dataclass
class _HttpJob:
    transcript: str  # as sent (fault triggers match it)
    text: str  # markers stripped, trimmed: what is spoken and billed
    voice_id: str
    fmt: OutputFormat
    context_id: str
    inband: Fault | None


async def _http_parse(
    request: web.Request, containers: tuple[str, ...]
) -> tuple[_HttpJob | None, web.Response | None]:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    try:
        body = await request.json()
    except ValueError:
        return None, json_error(400, "invalid_request", "body is not valid JSON")
    if not isinstance(body, dict):
        return None, json_error(400, "invalid_request", "body must be a JSON object")
    for name in ("model_id", "transcript", "voice", "output_format"):
        if body.get(name) is None:
            return None, json_error(400, "invalid_request", f"missing required field {name!r}")
    if body["model_id"] != MODEL_ID:
        return None, json_error(
            400, "unknown_model", f"unknown model_id {body['model_id']!r}; use {MODEL_ID!r}"
        )
    transcript = body["transcript"]
    if not isinstance(transcript, str):
        return None, json_error(400, "invalid_request", "transcript must be a string")
    fmt, _code, problem = parse_output_format(body["output_format"], containers=containers, defaults=False)
    if fmt is None:
        return None, json_error(400, "invalid_output_format", problem)
    voice = body["voice"]
    voice_id = voice if isinstance(voice, str) else voice_of(voice, emu.voices.default_voice_id)
    if voice_id not in emu.voices:
        return None, http_error_for(emu, error_spec("voice_not_found"), f"voice {voice_id!r} not found")
    inband: Fault | None = None
    text = transcript
    if emu.config.inband_faults:
        text, inband = parse_inband(transcript)
    text = text.strip()
    if not text and inband is None:
        return None, json_error(400, "invalid_request", "transcript is empty")
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

    def __init__(self, emu: EmulatorHost, job: _HttpJob) -> None:
        self.emu = emu
        self.job = job
        self.charged = 0
        self.fault: Fault | None = None
        self.pacer = Pacer()

    def begin(self) -> web.Response | None:
        """Take a concurrency slot, charge the credits and arm a fault; an error response if refused."""
        emu = self.emu
        if not emu.acquire_slot():
            emu.stats.nineninesix.contexts_rejected += 1
            return http_error_for(emu, error_spec("rate_limited"), "concurrency limit exceeded for your tier")
        chars = len(self.job.text)
        if chars and not emu.charge(chars):
            emu.release_slot()
            return http_error_for(emu, error_spec("insufficient_credits"))
        self.charged = chars
        emu.stats.nineninesix.contexts_started += 1
        self.fault = self.job.inband if self.job.inband is not None else emu.faults.match(self.job.transcript)
        if self.fault is not None:
            emu.stats.nineninesix.faults_fired.append(fault_label(self.fault))
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
            return http_error_for(self.emu, fault.spec)
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
        for sent, off in enumerate(range(0, len(audio), step)):
            if self.fault is not None and sent >= self.fault.after_chunks:
                return
            piece = audio[off : off + step]
            await self.pacer.pace(len(piece) / fmt.sample_width / fmt.sample_rate, emu.config.realtime_factor)
            yield piece

    async def stall(self, request: web.Request) -> None:
        """Send nothing more until the client goes away or the emulator stops."""
        # aiohttp gives a handler no client-disconnect event (handler cancellation is off): poll.
        transport = request.transport
        while not self.emu.stopping and transport is not None and not transport.is_closing():  # noqa: ASYNC110
            await asyncio.sleep(0.05)


async def _http_begin(request: web.Request, containers: tuple[str, ...]) -> _HttpRender | web.Response:
    """The shared start of ``/tts/bytes`` and ``/tts/sse``: key, body, then a concurrency slot and credits,
    then an ``error`` fault that fires before any audio (refunded). Returns the render, or the error answer to
    send instead."""
    if (denied := http_check_key(request)) is not None:
        return denied
    job, err = await _http_parse(request, containers)
    if job is None:
        assert err is not None
        return err
    r = _HttpRender(request.app[EMULATOR_KEY], job)
    if (denied := r.begin()) is not None:
        return denied
    if (answer := r.early_error()) is not None:
        r.end(refund=True)
        return answer
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
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    begun = await _http_begin(request, CONTAINERS_WS)
    if isinstance(begun, web.Response):
        return begun
    r, job = begun, begun.job
    refund = True
    try:
        resp = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        async for piece in r.pieces(await r.audio()):
            event = chunk_frame(job.context_id, piece)
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
            emu.stats.nineninesix.errors_sent.append((None, fault.spec.code))
            await resp.write(_sse(error_frame(fault.spec, job.context_id)))
            await resp.write_eof()
            return resp
        if fault.action == "close":
            await resp.write_eof()  # the stream just ends: no done event
            return resp
        await _http_cut(r, request, fault)
        return resp
    finally:
        r.end(refund=refund)
