"""The one API-key resolver: the argument or the provider's environment variable, registered with the
redactor (:func:`ttsbridge._redact.register_secret`) before anything can log it; a typed error if none."""

from __future__ import annotations

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


__all__ = ["resolve_api_key"]
