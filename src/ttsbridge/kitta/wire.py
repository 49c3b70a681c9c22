"""Kitta v2 wire rules, pure: MessagePack encode/decode, the typed errors of a session, the mapping of error
events and close codes to them, and the splitting of text into events within the limits."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

import msgpack
from pydantic import TypeAdapter, ValidationError

from ttsbridge._redact import redact
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError
from ttsbridge.kitta.models import ClientEvent, ErrorEvent, ServerEvent

__all__ = [
    "RETRYABLE_CLOSE_CODES",
    "KittaConnectionClosed",
    "KittaLimitError",
    "KittaProtocolError",
    "decode",
    "encode",
    "error_from_close",
    "error_from_event",
    "split_text",
]

#: Close codes after which a retry is allowed even without an error event (service restart, try again later).
RETRYABLE_CLOSE_CODES: Final[frozenset[int]] = frozenset({1012, 1013})

_SERVER_EVENT: TypeAdapter[Any] = TypeAdapter(ServerEvent)
_KNOWN_SERVER_EVENTS: Final = frozenset({"authenticated", "ready", "audio", "usage", "finish", "error"})


class KittaProtocolError(TTSBridgeError):
    """The server broke the protocol (garbage frame, event out of order), or the caller did."""

    retryable = False


class KittaLimitError(TTSBridgeError, ValueError):
    """A client-side limit would be exceeded; raised before anything is sent."""

    retryable = False

    def __init__(self, limit: str, value: int, maximum: int, message: str) -> None:
        self.limit = limit
        self.value = value
        self.maximum = maximum
        super().__init__(message, retryable=False)


class KittaConnectionClosed(TTSConnectionError):
    """The socket closed before ``finish``. Retryable only for close codes 1012/1013."""

    def __init__(self, message: str, *, close_code: int | None, retryable: bool) -> None:
        self.close_code = close_code
        super().__init__(message, retryable=retryable)


# ------------------------------------------------------------------------------------------- encode / decode


def encode(event: ClientEvent) -> bytes:
    """One client event as a MessagePack map (``None`` fields left out)."""
    return msgpack.packb(event.model_dump(exclude_none=True), use_bin_type=True)


def decode(data: bytes | bytearray | memoryview) -> ServerEvent | None:
    """One server frame -> typed event; ``None`` for an event type this client doesn't know (ignored).

    Raises :class:`KittaProtocolError` for a frame that is not a MessagePack map with a known shape.
    """
    try:
        obj = msgpack.unpackb(bytes(data), raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise KittaProtocolError(f"kitta: undecodable server frame ({type(exc).__name__})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("event"), str):
        raise KittaProtocolError("kitta: server frame is not an event map")
    if obj["event"] not in _KNOWN_SERVER_EVENTS:
        return None
    try:
        return _SERVER_EVENT.validate_python(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise KittaProtocolError(
            f"kitta: malformed {obj['event']!r} event: {'.'.join(map(str, err['loc']))}: {err['msg']}"
        ) from None


def error_from_event(
    event: ErrorEvent, request_id: str | None = None, secrets: tuple[str, ...] = ()
) -> TTSAPIError:
    """Map a server ``error`` event to :class:`TTSAPIError` (the server closes the socket after it).

    ``secrets`` are masked in the server's text (a server may echo the key it was given)."""
    return TTSAPIError(
        redact(event.message or event.code, secrets),
        provider="kitta",
        error_code=redact(event.code, secrets),
        retryable=event.retryable,
        closes_connection=True,
        request_id=event.request_id or request_id,
    )


def error_from_close(
    code: int | None, reason: str = "", secrets: tuple[str, ...] = ()
) -> KittaConnectionClosed:
    retryable = code in RETRYABLE_CLOSE_CODES
    reason = redact(reason, secrets) if reason else reason
    text = f"kitta: connection closed before finish (code {code}{', ' + reason if reason else ''})"
    return KittaConnectionClosed(text, close_code=code, retryable=retryable)


# ----------------------------------------------------------------------------------------------- splitting

_SENTENCE_END = re.compile(r"[.!?…。！？；;]+[\"'”’)\]]*\s+|[。！？]+")
_WORD_END = re.compile(r"\s+")


def _cuts(text: str, pattern: re.Pattern[str]) -> list[str]:
    """Split keeping separators attached to the piece before them (pieces join back to ``text``)."""
    pieces: list[str] = []
    start = 0
    for m in pattern.finditer(text):
        if m.end() > start:
            pieces.append(text[start : m.end()])
            start = m.end()
    if start < len(text):
        pieces.append(text[start:])
    return pieces


def _pack(pieces: list[str], limit: int) -> Iterator[str]:
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece) > limit:
            yield current
            current = ""
        current += piece
    if current:
        yield current


def split_text(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters that join back to ``text`` exactly.

    Pieces end at sentence boundaries where possible, else at word boundaries, else (one word longer than
    the limit) at ``limit`` characters. Neighbouring short sentences are packed together.
    """
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if len(text) <= limit:
        return [text] if text else []
    out: list[str] = []
    for sentence in _pack(_cuts(text, _SENTENCE_END), limit):
        if len(sentence) <= limit:
            out.append(sentence)
            continue
        words: list[str] = []
        for word in _cuts(sentence, _WORD_END):
            if len(word) <= limit:
                words.append(word)
            else:
                words.extend(word[i : i + limit] for i in range(0, len(word), limit))
        out.extend(_pack(words, limit))
    return out
