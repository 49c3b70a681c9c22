"""Nineninesix wire pieces shared by the WebSocket and HTTP routes: formats, frames, keys, error answers."""

from __future__ import annotations

import asyncio
import base64
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from ttsbridge.audio.g711 import encode_from_pcm16
from ttsbridge.audio.resample import resample_oneshot
from ttsbridge.emulator.nineninesix.config import NATIVE_SAMPLE_RATE
from ttsbridge.emulator.nineninesix.faults import DOC_URL, ErrorSpec, Fault

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

CONTAINERS_WS = ("raw",)
CONTAINERS_HTTP = ("raw", "wav")
ENCODINGS = ("pcm_s16le", "pcm_mulaw", "pcm_alaw")
SAMPLE_RATES = (8000, 16000, 22050)
TRUE_WORDS = ("true", "1", "yes", "on")

#: Where the app keeps its Emulator.
EMULATOR_KEY: web.AppKey[Any] = web.AppKey("ttsbridge_emulator", object)


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


def voice_of(value: Any, default: str) -> str:
    """The voice id a request names (mode "id"), else the default voice."""
    if isinstance(value, dict) and value.get("mode", "id") == "id" and isinstance(value.get("id"), str):
        return value["id"]
    return default


def error_frame(spec: ErrorSpec, context_id: str | None, message: str | None = None) -> dict[str, Any]:
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


def chunk_frame(context_id: str, data: bytes) -> dict[str, Any]:
    return {
        "type": "chunk",
        "context_id": context_id,
        "done": False,
        "status_code": 206,
        "data": base64.b64encode(data).decode("ascii"),
    }


def done_frame(context_id: str, *, cancelled: bool = False) -> dict[str, Any]:
    frame: dict[str, Any] = {"type": "done", "context_id": context_id, "done": True, "status_code": 200}
    if cancelled:
        frame["cancelled"] = True
    return frame


def api_key_of(request: web.Request, *, allow_query: bool) -> str | None:
    auth = request.headers.get("Authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip()
    key = request.headers.get("X-API-Key")
    if key:
        return key.strip()
    if allow_query:
        return request.query.get("api_key")
    return None


def json_error(status: int, error: str, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": error, "message": message}, status=status, headers=headers)


async def forever() -> None:
    await asyncio.get_running_loop().create_future()


def http_check_key(request: web.Request) -> web.Response | None:
    emu: EmulatorHost = request.app[EMULATOR_KEY]
    emu.stats.nineninesix.http_requests += 1
    emu.notify()
    if not emu.config.is_valid_key(api_key_of(request, allow_query=False)):
        return json_error(401, "unauthorized", "missing or invalid API key")
    return None


def http_error_for(emu: EmulatorHost, spec: ErrorSpec, message: str | None = None) -> web.Response:
    headers = {"Retry-After": f"{emu.config.retry_after_s:g}"} if spec.http_status == 429 else None
    emu.stats.nineninesix.errors_sent.append((None, spec.code))
    emu.notify()
    return json_error(spec.http_status, spec.http_error, message or spec.message, headers)


def fault_label(fault: Fault) -> str:
    return f"error:{fault.error_code}" if fault.action == "error" else fault.action
