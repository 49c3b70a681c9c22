"""The fixed facts of the Nineninesix API the protocol decides with: its URLs, the error catalog of the WebSocket
API and what each error does (spec: "Error codes"), and the handshake-error mapping. Pure data and functions."""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit, urlunsplit

from ttsbridge import _keys
from ttsbridge._redact import redact
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSInvalidOptionError
from ttsbridge.nineninesix.models import ErrorMessage

PROVIDER = "nineninesix"
API_KEY_ENV = "NINENINESIX_API_KEY"

#: Nineninesix's connection knobs: the engine's defaults (a pooled connection replaced after 60 s idle, a
#: keepalive ping every 20 s idle; docs/nineninesix.md "Connection settings").
SETTINGS = ConnectionSettings()


def resolve_api_key(api_key: str | None) -> str:
    """The key from the argument or ``$NINENINESIX_API_KEY`` (the shared resolver, :mod:`ttsbridge._keys`)."""
    return _keys.resolve_api_key(api_key, env=API_KEY_ENV, what="a Nineninesix key (sk_996_...)")


def derive_urls(base_url: str) -> tuple[str, str]:
    """``(http_base, ws_base)`` from one base URL (http/https/ws/wss), without a trailing slash."""
    parts = urlsplit(base_url.strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise TTSInvalidOptionError("base_url", base_url, "an http(s):// or ws(s):// URL with a host")
    secure = scheme in ("https", "wss")
    path = parts.path.rstrip("/")
    http = urlunsplit(("https" if secure else "http", parts.netloc, path, "", ""))
    ws = urlunsplit(("wss" if secure else "ws", parts.netloc, path, "", ""))
    return http, ws


def ws_url(base_url: str, api_key: str, cancel_ack: bool) -> str:
    """The connection URL (the key is in it, as the API requires: never log it)."""
    query = {"api_key": api_key}
    if cancel_ack:
        query["cancel_ack"] = "true"
    return f"{derive_urls(base_url)[1]}/tts/websocket?{urlencode(query)}"


@dataclass(frozen=True)
class ErrorEffect:
    """What one catalog error does."""

    status_code: int
    closes_socket: bool
    retryable: bool
    #: True when retrying the same configuration can never succeed (key, voice, model, format; not credits)
    fatal: bool
    description: str
    #: The server dropped the context and nothing else: the turn may be replayed on a fresh context_id
    fresh_context: bool = False


#: The error catalog of the WebSocket API and its effects (spec: "Error codes").
ERROR_CATALOG: dict[str, ErrorEffect] = {
    "unknown_model": ErrorEffect(400, True, False, True, "unknown model_id"),
    "concurrent_limit": ErrorEffect(429, False, True, False, "too many concurrent contexts", True),
    "insufficient_credits": ErrorEffect(402, True, False, False, "out of credits"),  # can be topped up
    "voice_not_found": ErrorEffect(404, True, False, True, "unknown voice id"),
    "unsupported_container": ErrorEffect(400, True, False, True, "output_format.container not supported"),
    "unsupported_encoding": ErrorEffect(400, True, False, True, "output_format.encoding not supported"),
    "invalid_sample_rate": ErrorEffect(400, True, False, True, "output_format.sample_rate not supported"),
    "generation_failed": ErrorEffect(500, False, True, False, "synthesis failed for this context"),
    "not_initialized": ErrorEffect(503, True, True, False, "the service is not ready"),
    "context_not_found": ErrorEffect(404, False, False, False, "cancel for a context that is not active"),
    "missing_context_id": ErrorEffect(400, False, False, False, "cancel without context_id"),
}


def retryable_status(status: int) -> bool:
    """Whether a request that failed with HTTP ``status`` may be retried (5xx, 408, 429)."""
    return status >= 500 or status in (408, 429)


def effect_of(error_code: str, status_code: int | None) -> ErrorEffect:
    """Unknown codes: judge by status. 5xx and 429 are worth a retry; other 4xx are not."""
    known = ERROR_CATALOG.get(error_code)
    if known is not None:
        return known
    status = status_code or 500
    # An unknown error is assumed to close the socket: the safe reading (the next turn reconnects).
    return ErrorEffect(status, True, retryable_status(status), status in (401, 402, 403), "unknown error")


def api_error(msg: ErrorMessage) -> TTSAPIError:
    eff = effect_of(msg.error_code, msg.status_code)
    text = msg.message or msg.title or eff.description
    return TTSAPIError(
        text,
        provider=PROVIDER,
        error_code=msg.error_code,
        status_code=msg.status_code if msg.status_code is not None else eff.status_code,
        retryable=eff.retryable,
        closes_connection=eff.closes_socket,
        fatal=eff.fatal if msg.error_code in ERROR_CATALOG else None,  # unknown codes: the errors table
        request_id=msg.request_id,
        context_id=msg.context_id,
        title=msg.title,
    )


def handshake_error(status: int, body: bytes, api_key: str) -> TTSBridgeError:
    """The typed error of an upgrade the server rejected (the body's ``error``/``message`` when it has them)."""
    code, message = "http_error", f"handshake rejected with HTTP {status}"
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            code = str(data.get("error") or data.get("error_code") or code)
            message = str(data.get("message") or message)
    except ValueError:
        pass
    if status == 401:
        code = "unauthorized" if code == "http_error" else code
    return TTSAPIError(
        redact(message, (api_key,)),
        provider=PROVIDER,
        error_code=code,
        status_code=status,
        retryable=retryable_status(status),
        closes_connection=True,
    )


__all__ = [
    "API_KEY_ENV",
    "ERROR_CATALOG",
    "PROVIDER",
    "ErrorEffect",
    "api_error",
    "derive_urls",
    "effect_of",
    "handshake_error",
    "resolve_api_key",
    "ws_url",
]
