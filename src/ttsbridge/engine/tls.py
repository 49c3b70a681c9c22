"""TLS for every connection ttsbridge makes (WebSocket and HTTP): one verifying context per trust
configuration, built off the event loop, and a typed error for a certificate that fails verification.

Which certificates are trusted (docs/production.md, "TLS"):

1. the system store (OpenSSL's default paths, as ``ssl.create_default_context()`` loads them);
2. ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set (OpenSSL reads them for its default paths; they are also
   loaded explicitly, so a bundle named there is trusted on every platform);
3. certifi's bundle, only when neither is set and no system store exists (a minimal container without
   ``ca-certificates``), as LiveKit's own HTTP session does.

Building a context parses a whole CA bundle (milliseconds): :func:`client_context` builds it once per trust
configuration in a worker thread and caches it (an ``SSLContext`` is safe to share across threads and loops),
so no connect blocks its loop on it. websockets would otherwise build a fresh default context, on the loop,
for every ``wss://`` connect.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
from urllib.parse import urlsplit

from ttsbridge.errors import ErrorCategory, TTSConnectionError

__all__ = [
    "TTSCertificateError",
    "certificate_error",
    "client_context",
    "client_context_sync",
    "has_system_store",
    "is_secure",
]

_lock = threading.Lock()
_contexts: dict[tuple[str | None, str | None], ssl.SSLContext] = {}


class TTSCertificateError(TTSConnectionError):
    """The server's TLS certificate could not be verified. Permanent for this endpoint until the trust
    configuration changes: not retryable, fatal. Names the host and the fix; never holds a key or a URL's
    query."""

    retryable = False
    fatal = True
    category = ErrorCategory.CONNECTIVITY

    def __init__(self, message: str, *, host: str, reason: str) -> None:
        super().__init__(message, retryable=False, fatal=True)
        self.host = host
        self.reason = reason


def has_system_store() -> bool:
    """Whether OpenSSL's default verify paths point at something on disk."""
    paths = ssl.get_default_verify_paths()
    return bool(
        (paths.cafile and os.path.exists(paths.cafile)) or (paths.capath and os.path.isdir(paths.capath))
    )


def _trust_key() -> tuple[str | None, str | None]:
    return os.environ.get("SSL_CERT_FILE") or None, os.environ.get("SSL_CERT_DIR") or None


def _build(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context()  # the system store (OpenSSL's default paths)
    if cafile or capath:
        ctx.load_verify_locations(cafile=cafile, capath=capath)
    elif not has_system_store():
        import certifi

        ctx.load_verify_locations(cafile=certifi.where())
    return ctx


def client_context_sync() -> ssl.SSLContext:
    """The verifying client context for the current trust configuration (built once; blocks while it is
    built: call it from a thread, or at start-up, never on a turn's path)."""
    key = _trust_key()
    ctx = _contexts.get(key)
    if ctx is None:
        with _lock:
            ctx = _contexts.get(key)
            if ctx is None:
                ctx = _contexts[key] = _build(*key)
    return ctx


async def client_context() -> ssl.SSLContext:
    """:func:`client_context_sync` without blocking the loop: the first build runs in a worker thread."""
    ctx = _contexts.get(_trust_key())
    if ctx is not None:
        return ctx
    return await asyncio.to_thread(client_context_sync)


def is_secure(url: str) -> bool:
    return urlsplit(url).scheme.lower() in ("wss", "https")


def certificate_error(provider: str, url: str, exc: BaseException) -> TTSCertificateError:
    """The typed error for a certificate ``url``'s host failed verification with (``exc``:
    ``ssl.SSLCertVerificationError`` or aiohttp's certificate error). Only the host is named."""
    host = urlsplit(url).hostname or "?"
    reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or type(exc).__name__
    if not isinstance(reason, str):
        reason = str(reason)
    store = "" if has_system_store() else " No system CA store was found (certifi's bundle was used)."
    return TTSCertificateError(
        f"{provider}: the TLS certificate of {host} could not be verified ({reason}).{store} To trust it, "
        "point SSL_CERT_FILE (or SSL_CERT_DIR) at the CA bundle that signs it (a corporate proxy's CA, a "
        "private CA), install the system CA store (ca-certificates), or pass ssl= an ssl.SSLContext that "
        "trusts it. Not retried: every connection to this host fails the same way until then.",
        host=host,
        reason=reason,
    )
