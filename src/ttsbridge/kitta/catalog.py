"""Kitta v2 connection rules, pure: the URL, the handshake's headers, the mapping of a refused handshake to a
typed error, retry ids and the retry backoff. Used by :class:`~ttsbridge.kitta.protocol.KittaProtocol`.

The key travels only in the ``Authorization`` header (or the in-band ``auth`` frame), never in the URL."""

from __future__ import annotations

import contextlib
import json
import random
from collections.abc import Mapping
from typing import Final
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ttsbridge import _keys
from ttsbridge._redact import redact, safe_url
from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.protocol import ConnectRequest
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.kitta.models import PATH, SUBPROTOCOL

# fmt: off
__all__ = [
    "API_KEY_ENV", "SETTINGS", "KittaHandshake", "backoff_delay", "build_url", "handshake_error",
    "resolve_api_key", "retry_backoff", "retry_request_id", "safe_url",
]
# fmt: on

API_KEY_ENV = "KITTA_API_KEY"

#: Kitta's connection knobs (docs/kitta.md "Connection settings"), the engine's defaults but for: a keepalive
#: ping every 2 s idle (a turn that takes a dead standby loses its turn, so the standby is checked often within
#: its max age), 16 MiB messages (a whole segment of WAV can come at once), a standby replaced after 15 s unused
#: (below the server's idle and authentication timeouts), and no idle limit (one turn per connection).
SETTINGS = ConnectionSettings(ping_interval=2.0, max_size=16 * 2**20, max_age=15.0, max_idle=None)

_RETRYABLE_HTTP: Final = frozenset({408, 425, 429, 500, 502, 503, 504})
_HTTP_CODES: Final = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    429: "rate_limited",
}
_KEY_PARAMS: Final = frozenset({"token", "api_key", "apikey", "key", "access_token"})
#: Longest ``Retry-After`` honoured by the backoff (seconds).
MAX_RETRY_AFTER: Final = 30.0


def resolve_api_key(api_key: str | None) -> str:
    """The key from the argument or ``$KITTA_API_KEY``, registered with the redactor; a clear error if none."""
    return _keys.resolve_api_key(api_key, env=API_KEY_ENV, what="a Kitta API key").strip()


def build_url(base_url: str) -> str:
    """``base_url`` -> the ``/v2/tts/live`` WebSocket URL (http -> ws, https -> wss). A key in the URL is
    refused (:class:`TTSInvalidOptionError`): Kitta keys never travel in a URL."""
    parts = urlsplit(base_url)
    shown = safe_url(base_url)
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise TTSInvalidOptionError("base_url", shown, "an absolute ws://, wss://, http:// or https:// URL")
    if any(k.lower() in _KEY_PARAMS for k, _ in parse_qsl(parts.query, keep_blank_values=True)):
        raise TTSInvalidOptionError(
            "base_url", shown, "a URL without credentials", hint="pass the key as api_key="
        )
    if "@" in parts.netloc:
        raise TTSInvalidOptionError("base_url", shown, "a URL without user:password")
    path = parts.path.rstrip("/")
    if not path.endswith(PATH):
        path += PATH
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


def retry_request_id(base: str, attempt: int) -> str:
    """``request_id`` of retry ``attempt`` (1, 2...) of the generation first started as ``base``.

    The first id is burnt server-side once its session was created (reuse -> ``invalid_state``), so a retry
    needs a new one. Deriving it (``<base>.r<attempt>``) keeps the duplicate protection meaningful: one
    attempt of one generation can never be started twice, and support can trace the lineage."""
    suffix = f".r{attempt}"
    return base[: 128 - len(suffix)] + suffix


def handshake_error(
    status: int, body: bytes | None, headers: Mapping[str, str], secrets: tuple[str, ...] = ()
) -> TTSAPIError:
    """A refused upgrade (HTTP ``status``, JSON ``body``) as a typed error; ``secrets`` masked in its text."""
    code = _HTTP_CODES.get(status, "server_error" if status >= 500 else f"http_{status}")
    message = f"handshake rejected with HTTP {status}"
    try:
        parsed = json.loads(body or b"{}")
        if isinstance(parsed, dict):
            if isinstance(parsed.get("error"), str):
                code = parsed["error"]
            if isinstance(parsed.get("message"), str):
                message = parsed["message"]
    except ValueError:
        pass
    retry_after: float | None = None
    raw = headers.get("Retry-After")
    if raw:
        with contextlib.suppress(ValueError):
            retry_after = max(0.0, float(raw))
    return TTSAPIError(
        redact(message, secrets),  # the body is the server's text: it may echo the key it was given
        provider="kitta",
        error_code=redact(code, secrets),
        status_code=status,
        retryable=status in _RETRYABLE_HTTP,
        closes_connection=True,
        retry_after=retry_after,
    )


def retry_backoff(initial: float, maximum: float) -> Backoff:
    """Kitta's retry schedule: the engine's :class:`Backoff` from ``initial`` doubling to ``maximum``, with
    *equal* jitter (never below half the ceiling: a retry never starts at once) and the server's
    ``retry_after`` as a lower bound (itself capped at :data:`MAX_RETRY_AFTER`). The protocol's retries and
    the provider's hold before the next turn after a failure both wait by it."""
    return Backoff(base=initial, factor=2.0, cap=maximum, floor=0.5, max_retry_after=MAX_RETRY_AFTER)


def backoff_delay(
    attempt: int, err: TTSBridgeError, initial: float, maximum: float, rng: random.Random | None = None
) -> float:
    """Seconds to wait before retry ``attempt`` (1, 2...) by :func:`retry_backoff`."""
    retry_after = getattr(err, "retry_after", None)
    return retry_backoff(initial, maximum).delay(attempt, retry_after or None, rand=(rng or random).random)


class KittaHandshake:
    """The handshake part of :class:`~ttsbridge.kitta.protocol.KittaProtocol`: what to open, and the typed
    error for every way opening it can fail."""

    url: str
    auth: str
    token: str | None

    def _secrets(self) -> tuple[str, ...]:
        raise NotImplementedError

    def connect_request(self) -> ConnectRequest:
        headers = [("Authorization", f"Bearer {self.token}")] if self.auth == "header" and self.token else []
        return ConnectRequest(self.url, tuple(headers), (SUBPROTOCOL,), secrets=self._secrets())

    def handshake_failed(self, status: int, body: bytes) -> TTSBridgeError:
        return handshake_error(status, body, {}, self._secrets())

    def handshake_rejected(self, status: int, headers: Mapping[str, str], body: bytes) -> TTSBridgeError:
        return handshake_error(status, body, headers, self._secrets())

    def connect_failed(self, kind: str, detail: str, timeout: float) -> TTSBridgeError:
        url = self.url
        if kind == "timeout":
            return TTSTimeoutError(f"kitta: handshake with {url} timed out")
        if kind == "invalid_uri":
            return TTSInvalidOptionError("base_url", url, "a valid WebSocket URL", hint=detail)
        if kind == "invalid_handshake":
            return TTSConnectionError(f"kitta: bad WebSocket handshake with {url}: {detail}", retryable=False)
        return TTSConnectionError(f"kitta: cannot connect to {url}: {detail}")

    def _subprotocol_error(self, selected: str | None) -> TTSBridgeError | None:
        if selected == SUBPROTOCOL:
            return None
        return TTSConnectionError(
            f"kitta: the server did not select the {SUBPROTOCOL} subprotocol", retryable=False
        )
