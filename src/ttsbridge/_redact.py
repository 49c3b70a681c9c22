"""Keep API keys out of log lines, exception texts and reprs.

The Nineninesix key travels in the WebSocket URL (``?api_key=``) by spec, so any text that may hold a URL goes
through :func:`redact` before it is logged or put into an exception.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

_QUERY_KEY = re.compile(r"(?i)((?:api_key|token|key)=)(?!None\b)[^&\s'\";,)]+")
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]+")
_SK996 = re.compile(r"sk_996_[A-Za-z0-9_\-]+")

MASK = "***"

#: Every API key a client of this process was given: masked in every text that goes through :func:`redact`,
#: whatever its shape (Kitta keys have no recognisable prefix). Bounded, oldest first out.
_REGISTERED: dict[str, None] = {}
_MAX_REGISTERED = 256


def register_secret(secret: str | None) -> None:
    """Mask ``secret`` in every later :func:`redact` call (clients call this with their key)."""
    if not secret or len(secret) < 4:
        return
    _REGISTERED.pop(secret, None)
    _REGISTERED[secret] = None
    while len(_REGISTERED) > _MAX_REGISTERED:
        del _REGISTERED[next(iter(_REGISTERED))]


def redact(text: object, secrets: Iterable[str | None] = ()) -> str:
    """Return ``str(text)`` with every secret and every key-looking URL parameter masked."""
    s = str(text)
    for secret in (*secrets, *_REGISTERED):
        if secret and len(secret) >= 4:
            s = s.replace(secret, MASK)
    s = _QUERY_KEY.sub(lambda m: m.group(1) + MASK, s)
    s = _BEARER.sub(lambda m: m.group(1) + MASK, s)
    return _SK996.sub(MASK, s)


def safe_url(url: str) -> str:
    """``url`` for a message or a ``repr``: no user info, no query (either may hold a credential)."""
    try:
        parts = urlsplit(url)
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit((parts.scheme, host, parts.path, "", "")) + ("?…" if parts.query else "")
    except ValueError:
        return "<unparsable URL>"


def mask_key(key: str | None) -> str:
    """A repr-safe stand-in for a key: never more than its first 7 characters."""
    if not key:
        return "None"
    return repr(key[:7] + "…")
