"""The one API-key resolver: the argument or the provider's environment variable, registered with the
redactor (:func:`ttsbridge._redact.register_secret`) before anything can log it; a typed error if none."""

from __future__ import annotations

import hashlib
import os

from ttsbridge._redact import register_secret
from ttsbridge.errors import TTSInvalidOptionError


def resolve_api_key(api_key: str | None, *, env: str, what: str) -> str:
    """``api_key``, else ``$env``. ``what`` names the key in the error (``"a Kitta API key"``)."""
    key = api_key or os.environ.get(env)
    register_secret(key)
    if not key or not key.strip():
        raise TTSInvalidOptionError("api_key", None, f"{what}, passed as api_key= or set in ${env}")
    return key


def account_scope(secret: str | None) -> str:
    """A stand-in for the account behind ``secret`` (an API key), for the phrase cache's key: 16 hex digits of
    a salted sha256, so two accounts never share entries (a cloned voice id is an account's own) and the key
    itself is never stored. Empty for no key."""
    if not secret:
        return ""
    return hashlib.sha256(b"ttsbridge.cache.account\0" + secret.strip().encode()).hexdigest()[:16]


__all__ = ["account_scope", "resolve_api_key"]
