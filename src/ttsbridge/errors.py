"""Typed errors shared by every provider and adapter.

Every error says what happened and whether a retry can help (``retryable``). Texts never hold an API key:
everything that may contain a URL is passed through :func:`ttsbridge._redact.redact` first.
"""

from __future__ import annotations

from typing import Any


class TTSBridgeError(Exception):
    """Base of all ttsbridge errors."""

    retryable: bool = False

    def __init__(self, message: str, *, retryable: bool | None = None) -> None:
        from ttsbridge._redact import redact

        super().__init__(redact(message))
        if retryable is not None:
            self.retryable = retryable

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""


class TTSInvalidOptionError(TTSBridgeError, ValueError):
    """An option is outside the allowed values. Raised before any connection is made."""

    def __init__(self, field: str, value: Any, allowed: Any, *, hint: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        text = f"invalid {field}={value!r}; allowed: {allowed}"
        if hint:
            text += f" ({hint})"
        super().__init__(text, retryable=False)


class TTSConnectionError(TTSBridgeError):
    """The connection could not be made or was lost. A retry on a new connection can help."""

    retryable = True


class TTSTimeoutError(TTSBridgeError):
    """A bounded wait ran out (connect, first audio, cancel acknowledgement...)."""

    retryable = True


class TTSAPIError(TTSBridgeError):
    """The server answered with an error.

    Attributes:
        provider: ``"nineninesix"`` or ``"kitta"``.
        error_code: the server's machine-readable code (``voice_not_found``, ``rate_limited``...).
        status_code: HTTP-like status (400, 402, 429, 500...), or None where the provider has none.
        retryable: whether retrying the same request can help.
        closes_connection: whether the server closes the socket after this error.
        request_id: the server's request id, for support tickets.
        context_id: the context (turn) the error ended, if any.
        retry_after: seconds to wait before retrying, where the server said so.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        error_code: str,
        status_code: int | None = None,
        retryable: bool = False,
        closes_connection: bool = False,
        request_id: str | None = None,
        context_id: str | None = None,
        title: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.error_code = error_code
        self.status_code = status_code
        self.closes_connection = closes_connection
        self.request_id = request_id
        self.context_id = context_id
        self.title = title
        self.retry_after = retry_after
        status = f" {status_code}" if status_code is not None else ""
        hint = "retryable" if retryable else "not retryable"
        super().__init__(f"{provider} error {error_code}{status}: {message} ({hint})", retryable=retryable)
