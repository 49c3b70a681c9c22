"""A logger adapter that redacts secrets from every record (used for the websockets library's own logs)."""

from __future__ import annotations

import logging
from typing import Any

from ttsbridge._redact import redact


def _mask_frame(arg: Any, secrets: tuple[str, ...]) -> Any:
    """websockets logs frames at DEBUG with binary payloads shown as hex, where a text mask cannot see a key
    (Kitta's in-band ``auth`` frame): such a frame is shown by its size only."""
    data = getattr(arg, "data", None)
    opcode = getattr(arg, "opcode", None)
    if opcode is None or not isinstance(data, (bytes, bytearray, memoryview)):
        return arg
    raw = bytes(data)
    if any(s and s.encode() in raw for s in secrets):
        return f"{opcode.name} *** [{len(raw)} bytes, credential masked]"
    return arg


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Formats each message, masks keys and key-looking URL parameters, then logs the safe text."""

    def __init__(self, logger: logging.Logger, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(logger, {})
        self._secrets = secrets

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
        if args and self._secrets:
            args = tuple(_mask_frame(a, self._secrets) for a in args)
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):
            text = f"{msg} {args!r}"
        kwargs.setdefault("stacklevel", 2)
        exc_info = kwargs.pop("exc_info", None)
        if exc_info:
            # Tracebacks may quote the URL: log the redacted exception text instead of the raw traceback.
            exc = exc_info if isinstance(exc_info, BaseException) else None
            if exc is None:
                import sys

                exc = sys.exc_info()[1]
            if exc is not None:
                text += f" ({type(exc).__name__}: {exc})"
        self.logger.log(level, "%s", redact(text, self._secrets), **kwargs)
