"""Typed errors shared by every provider and adapter, each carrying its verdict.

Every error says what happened and how a caller should take it: its ``category`` (why it failed, in a
provider-neutral vocabulary), ``retryable`` (whether retrying the same request can help) and ``fatal``
(whether retrying the same configuration can *never* succeed: a rejected key, a key without access, an
unknown voice, model or format). The framework adapters only translate this verdict (Pipecat's
``ErrorCategory`` + ``force_treat_as_permanent``, LiveKit's ``APIError`` family); none of them decides it.

Texts never hold an API key: everything that may contain a URL is passed through
:func:`ttsbridge._redact.redact` first.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum
from typing import Any


class ErrorCategory(Enum):
    """Why an operation failed, independent of the provider (names and values mirror Pipecat 1.14's
    ``pipecat.utils.errors.ErrorCategory``; ``TIMEOUT`` is ours: LiveKit tells a timeout apart)."""

    UNKNOWN = "unknown"
    AUTHENTICATION = "authentication"
    AUTHORIZATION = "authorization"
    INVALID_REQUEST = "invalid_request"
    RATE_LIMIT = "rate_limit"
    QUOTA = "quota"
    CONNECTIVITY = "connectivity"
    TIMEOUT = "timeout"
    SERVER = "server"
    #: The application failed, not the provider (caller code; not produced by ttsbridge's own errors).
    APPLICATION = "application"


@dataclass(frozen=True)
class Verdict:
    """How a caller should take one error."""

    category: ErrorCategory
    #: Retrying the same request can help.
    retryable: bool
    #: Retrying the same configuration can never succeed (key, voice, model or format must change).
    fatal: bool


class TTSBridgeError(Exception):
    """Base of all ttsbridge errors."""

    retryable: bool = False
    category: ErrorCategory = ErrorCategory.UNKNOWN
    fatal: bool = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        category: ErrorCategory | None = None,
        fatal: bool | None = None,
    ) -> None:
        from ttsbridge._redact import redact

        super().__init__(redact(message))
        if retryable is not None:
            self.retryable = retryable
        if category is not None:
            self.category = category
        if fatal is not None:
            self.fatal = fatal

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else ""

    @property
    def verdict(self) -> Verdict:
        return Verdict(self.category, self.retryable, self.fatal)


class TTSInvalidOptionError(TTSBridgeError, ValueError):
    """An option is outside the allowed values. Raised before any connection is made."""

    category = ErrorCategory.INVALID_REQUEST
    fatal = True

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
    category = ErrorCategory.CONNECTIVITY


class TTSTimeoutError(TTSBridgeError):
    """A bounded wait ran out (connect, first audio, cancel acknowledgement...)."""

    retryable = True
    category = ErrorCategory.TIMEOUT


class TTSSilentConnectionError(TTSTimeoutError):
    """The connection went silent while the server owed something, and a WebSocket ping got no answer in time:
    the network path died without closing (a NAT or load balancer that forgot the flow, a changed network).
    A timeout by category; the connection is dead, a new one can help."""


# --- the default verdict of a server error, from its code and status ------------------------------------------

#: Error codes that mean the credentials were rejected.
AUTH_CODES = frozenset(
    {
        "unauthorized",
        "unauthenticated",
        "invalid_api_key",
        "missing_api_key",
        "authentication_failed",
        "auth_failed",
        "auth_timeout",
        "invalid_token",
    }
)
#: Error codes that mean the account (or, Kitta ``quota_exceeded``, the session) cannot pay for more audio.
QUOTA_CODES = frozenset(
    {"insufficient_credits", "insufficient_balance", "payment_required", "billing_limit", "quota_exceeded"}
)
#: Error codes that mean the request names something the server does not have, or a format it won't make:
#: retrying the same configuration can never succeed.
INVALID_CODES = frozenset(
    {
        "voice_not_found",
        "unknown_voice",
        "unknown_model",
        "model_not_found",
        "unsupported_container",
        "unsupported_encoding",
        "invalid_sample_rate",
        "unsupported_parameter",
        "invalid_parameter",
        "unsupported_format",
    }
)
#: Error codes that mean too many requests or contexts at once.
RATE_LIMIT_CODES = frozenset({"concurrent_limit", "rate_limited", "rate_limit"})
#: Server-side failures (a retry, or the next turn, may work).
SERVER_CODES = frozenset(
    {"generation_failed", "not_initialized", "internal_error", "upstream_unavailable", "service_unavailable"}
)


def api_verdict(error_code: str, status_code: int | None, retryable: bool) -> tuple[ErrorCategory, bool]:
    """The default ``(category, fatal)`` of a server error; the first matching row wins.

    Running out of credits is not fatal: an account can be topped up mid-call (Pipecat 1.14 files ``QUOTA``
    as recoverable), and a Kitta session limit resets with the next session.
    """
    code = (error_code or "").lower()
    if code in AUTH_CODES or status_code == 401:
        return ErrorCategory.AUTHENTICATION, True
    if status_code == 403 or code == "forbidden":
        return ErrorCategory.AUTHORIZATION, True
    if code in QUOTA_CODES or status_code == 402:
        return ErrorCategory.QUOTA, False
    if code in INVALID_CODES:
        return ErrorCategory.INVALID_REQUEST, True
    if status_code == 429 or code in RATE_LIMIT_CODES:
        return ErrorCategory.RATE_LIMIT, False
    if (status_code is not None and status_code >= 500) or code in SERVER_CODES or retryable:
        return ErrorCategory.SERVER, False
    # context_not_found, missing_context_id and anything new: this turn only. UNKNOWN, not INVALID_REQUEST,
    # which frameworks treat as permanent.
    return ErrorCategory.UNKNOWN, False


class TTSAPIError(TTSBridgeError):
    """The server answered with an error.

    Attributes:
        provider: ``"nineninesix"`` or ``"kitta"``.
        error_code: the server's machine-readable code (``voice_not_found``, ``rate_limited``...).
        status_code: HTTP-like status (400, 402, 429, 500...), or None where the provider has none.
        retryable: whether retrying the same request can help.
        category, fatal: as the provider said (its error catalog), else :func:`api_verdict`.
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
        category: ErrorCategory | None = None,
        fatal: bool | None = None,
    ) -> None:
        self.provider = provider
        self.error_code = error_code
        self.status_code = status_code
        self.closes_connection = closes_connection
        self.request_id = request_id
        self.context_id = context_id
        self.title = title
        self.retry_after = retry_after
        default_category, default_fatal = api_verdict(error_code, status_code, retryable)
        status = f" {status_code}" if status_code is not None else ""
        hint = "retryable" if retryable else "not retryable"
        super().__init__(
            f"{provider} error {error_code}{status}: {message} ({hint})",
            retryable=retryable,
            category=category if category is not None else default_category,
            fatal=fatal if fatal is not None else default_fatal,
        )


def verdict_of(exc: BaseException) -> Verdict:
    """The verdict of any exception: a ttsbridge error carries its own; transport errors from below (a
    refused socket, a timed-out wait) are retryable connectivity/timeout failures; anything else is a bug,
    neither retryable nor fatal."""
    if isinstance(exc, TTSBridgeError):
        return exc.verdict
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Verdict(ErrorCategory.TIMEOUT, True, False)
    if isinstance(exc, OSError):  # ConnectionError and socket.gaierror included
        return Verdict(ErrorCategory.CONNECTIVITY, True, False)
    return Verdict(ErrorCategory.UNKNOWN, False, False)
