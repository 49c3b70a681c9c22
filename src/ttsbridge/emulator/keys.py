"""The emulator's key policy, shared by both APIs.

Neither page gives the emulator a reason to refuse a key a user copies into its example (the Kitta page
defines no key format at all), so by default any non-empty key is accepted. An explicit key set (``api_keys``
on :class:`~ttsbridge.emulator.EmulatorConfig` and on ``KittaConfig``) restores strict checking, which is
how tests exercise bad keys.
"""

from __future__ import annotations

__all__ = ["describe_keys", "key_accepted"]


def key_accepted(api_keys: set[str] | None, key: str | None) -> bool:
    """``api_keys=None`` accepts any non-empty key; otherwise only a key in ``api_keys``."""
    if not key or not key.strip():
        return False
    return True if api_keys is None else key in api_keys


def describe_keys(api_keys: set[str] | None, example: str) -> str:
    """Which keys work, for a start-up line. Never prints a configured key."""
    if api_keys is None:
        return f"any non-empty key (e.g. {example})"
    n = len(api_keys)
    if not n:
        return "no key at all (api_keys is empty)"
    return f"only the {n} configured key{'s' if n != 1 else ''}"
