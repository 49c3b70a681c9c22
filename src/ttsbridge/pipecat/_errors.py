"""Map ttsbridge errors onto Pipecat's error categories, and decide which ones are fatal.

Pipecat 1.14 reports a fatal error by making the processor *unusable* (a permanent ``ErrorCategory`` or
``push_error(..., force_treat_as_permanent=True)``); the worker then applies its ``ProcessorUnusablePolicy``
(``CANCEL`` does what the deprecated ``ErrorFrame.fatal=True`` did). Non-fatal errors end the turn they hit
and leave the service usable.

Fatal here means what Pipecat's own ``ErrorCategory.is_permanent`` means: retrying the same configuration can
never succeed (a rejected key, a key without access, an unknown voice, model or format). Running out of
credits is not that: Pipecat 1.14 files ``QUOTA`` as recoverable (an account can be topped up mid-call), so a
402 ends the turn it hit, and the next turn tries again (once: the failed turn's remaining text is dropped,
nothing is retried within it).
"""

from __future__ import annotations

from dataclasses import dataclass

from pipecat.utils.errors import ErrorCategory

from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError

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


#: Server-side failures (a retry, or the next turn, may work).
_SERVER_CODES = frozenset(
    {"generation_failed", "not_initialized", "internal_error", "upstream_unavailable", "service_unavailable"}
)


@dataclass(frozen=True)
class ErrorVerdict:
    """How the Pipecat service reports an error."""

    category: ErrorCategory
    #: The service can do no more work until its configuration (key, credits, voice, model) changes.
    fatal: bool


def classify(exc: BaseException) -> ErrorVerdict:
    """The category of ``exc`` and whether it is fatal for the service."""
    if isinstance(exc, TTSAPIError):
        code = (exc.error_code or "").lower()
        status = exc.status_code
        if code in AUTH_CODES or status == 401:
            return ErrorVerdict(ErrorCategory.AUTHENTICATION, True)
        if status == 403 or code == "forbidden":
            return ErrorVerdict(ErrorCategory.AUTHORIZATION, True)
        if code in QUOTA_CODES or status == 402:
            # Not permanent: credits can be topped up, and a Kitta session limit resets with the next session.
            return ErrorVerdict(ErrorCategory.QUOTA, False)
        if code in INVALID_CODES:
            return ErrorVerdict(ErrorCategory.INVALID_REQUEST, True)
        if status == 429 or code in {"concurrent_limit", "rate_limited", "rate_limit"}:
            return ErrorVerdict(ErrorCategory.RATE_LIMIT, False)
        if (status is not None and status >= 500) or code in _SERVER_CODES or exc.retryable:
            return ErrorVerdict(ErrorCategory.SERVER, False)
        # context_not_found, missing_context_id and anything new: this turn only. UNKNOWN, not
        # INVALID_REQUEST, which Pipecat treats as permanent.
        return ErrorVerdict(ErrorCategory.UNKNOWN, False)
    if isinstance(exc, (TTSConnectionError, TTSTimeoutError, ConnectionError, TimeoutError, OSError)):
        return ErrorVerdict(ErrorCategory.CONNECTIVITY, False)
    if isinstance(exc, TTSInvalidOptionError):
        return ErrorVerdict(ErrorCategory.INVALID_REQUEST, True)
    return ErrorVerdict(ErrorCategory.UNKNOWN, False)
