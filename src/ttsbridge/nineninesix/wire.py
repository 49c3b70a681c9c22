"""Reading Nineninesix server frames: JSON decoding and explicit, cheap type checks of the fields we use.

Pure functions for :class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol`. Audio chunks (the hot path)
are checked with ``isinstance`` and a strict base64 decode, never a model; ``done`` and ``error`` frames (one
per turn) are checked field by field before their model is built, so a server frame can never raise a raw
``ValidationError`` out of the reader. What a malformed frame fails is decided by the protocol (see
docs/nineninesix.md, "Malformed frames").
"""

from __future__ import annotations

import binascii
from typing import Any

import orjson
import pybase64

from ttsbridge.errors import TTSConnectionError

_NoneType = type(None)

#: The types the spec gives every field we read of a ``done`` frame (absent fields take their default).
DONE_FIELDS: dict[str, tuple[type, ...]] = {"done": (bool,), "status_code": (int,), "cancelled": (bool,)}

#: The same for ``error`` frames (``context_id`` is checked for every frame, before its kind is known).
ERROR_FIELDS: dict[str, tuple[type, ...]] = {
    "error_code": (str,),
    "status_code": (int, _NoneType),
    "done": (bool,),
    "title": (str, _NoneType),
    "message": (str, _NoneType),
    "doc_url": (str, _NoneType),
    "request_id": (str, _NoneType),
}


def _strict_b64(data: str) -> bytes:
    # strict alphabet and padding (what base64.b64decode(data, validate=True) checks), SIMD-decoded: a 40 ms
    # chunk in ~0.8 us instead of ~4 (docs/benchmarks.md, pass 7)
    return pybase64.b64decode(data, validate=True)


_NAMES = {str: "a string", int: "an integer", bool: "a boolean", _NoneType: "null"}


class NineninesixProtocolError(TTSConnectionError):
    """The server sent a frame that breaks the protocol: not a JSON object, a field of the wrong type, audio
    that is not base64. Retryable (on a new context or connection), like any connection failure."""


def decode_frame(text: str | bytes) -> dict[str, Any] | None:
    """The JSON object of one frame, or None when it is not one (undecodable bytes, not JSON, not an object)."""
    try:
        raw = orjson.loads(text)  # strict RFC 8259 JSON (no NaN, no lone surrogates), ~4x json's speed
    except ValueError:  # orjson.JSONDecodeError (bytes that are not UTF-8 included)
        return None
    return raw if isinstance(raw, dict) else None


def _allowed(types: tuple[type, ...]) -> str:
    return " or ".join(_NAMES[t] for t in types)


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    # bool is an int in Python; the wire's integers are never booleans
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def field_problem(raw: dict[str, Any], fields: dict[str, tuple[type, ...]]) -> str | None:
    """``"<field> must be <types>, got <type>"`` for the first field of ``raw`` outside its types, else None."""
    for name, types in fields.items():
        if name in raw and not _type_ok(raw[name], types):
            return f"{name} must be {_allowed(types)}, got {type(raw[name]).__name__}"
    return None


def context_id_problem(raw: dict[str, Any]) -> str | None:
    cid = raw.get("context_id")
    if cid is None or isinstance(cid, str):
        return None
    return f"context_id must be a string or null, got {type(cid).__name__}"


def chunk_audio(data: Any) -> bytes:
    """The bytes of a chunk's ``data``: a base64 string (strict alphabet and padding)."""
    if not isinstance(data, str):
        raise malformed("chunk", f"data must be a base64 string, got {type(data).__name__}")
    try:
        return _strict_b64(data)
    except (binascii.Error, ValueError):
        raise malformed("chunk", "data is not valid base64") from None


def malformed(kind: str, problem: str) -> NineninesixProtocolError:
    return NineninesixProtocolError(f"nineninesix: malformed {kind} frame: {problem}")
