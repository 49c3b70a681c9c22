"""A logger adapter that redacts secrets from every record (used for the websockets library's own logs)."""

from __future__ import annotations

import logging
from typing import Any

from ttsbridge._redact import redact


class RedactingLogger(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Formats each message, masks keys and key-looking URL parameters, then logs the safe text."""

    def __init__(self, logger: logging.Logger, secrets: tuple[str, ...] = ()) -> None:
        super().__init__(logger, {})
        self._secrets = secrets

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        if not self.isEnabledFor(level):
            return
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
