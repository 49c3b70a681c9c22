"""The phrase cache's key: sha256 of a canonical JSON of everything that changes the audio. Pure.

A provider says what changes its audio (:meth:`~ttsbridge.turns.TurnProvider.cache_identity`: provider,
endpoint, account scope, model, voice, every voice control, language, wire encoding and rate, the output
rate); the text is added normalised (:func:`normalise_text`). Nothing secret goes in: the account scope is a
digest of the key (:func:`account_scope`), and the key of an entry is a digest of the whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ttsbridge._keys import account_scope

__all__ = ["KEY_VERSION", "account_scope", "normalise_text", "phrase_key"]

#: Bumped when the key's recipe or the entry's audio changes meaning: old entries then simply miss.
#: 2: the text is only trimmed (1 collapsed inner whitespace: an entry of "Hello  there." was keyed as
#: "Hello there."'s), Kitta's identity is its start.request.
KEY_VERSION = 2


def normalise_text(text: str) -> str:
    """The text as the server renders it: trimmed, as both servers trim each transcript / segment (the
    Nineninesix page: "Trimmed server-side"). Nothing else: whitespace inside a text is the text's own (a
    server may render ``"Hello  there."`` otherwise than ``"Hello there."``; the emulator does), and how the
    adapters split a text is keyed apart anyway (the segments)."""
    return text.strip()


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def phrase_key(identity: Mapping[str, Any], text: str | Sequence[str]) -> str:
    """The entry key (64 hex digits) of ``text`` rendered with ``identity`` (a provider's
    :meth:`~ttsbridge.turns.TurnProvider.cache_identity`). A sequence is the text as it is sent, one request
    per item (a text sent sentence by sentence renders otherwise than sent whole); blank items are dropped."""
    parts = [text] if isinstance(text, str) else list(text)
    segments = [normalise_text(p) for p in parts if p.strip()]
    doc = {"v": KEY_VERSION, "identity": _canonical(identity), "segments": segments}
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
