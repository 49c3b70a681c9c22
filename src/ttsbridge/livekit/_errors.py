"""LiveKit's API errors from the verdict a ttsbridge error carries (the counterpart of ``pipecat/_errors.py``)."""

from __future__ import annotations

from livekit.agents import APIConnectionError, APIError, APIStatusError, APITimeoutError

from ttsbridge._redact import redact
from ttsbridge.errors import ErrorCategory, TTSAPIError, TTSBridgeError, verdict_of

__all__ = ["to_api_error"]


def to_api_error(exc: BaseException, *, audio_pushed: bool, secrets: tuple[str, ...] = ()) -> APIError:
    """Translate the verdict of a ttsbridge (or transport) error into LiveKit's API errors.

    A server error becomes ``APIStatusError``, a ``TIMEOUT`` ``APITimeoutError``, a ``CONNECTIVITY``
    ``APIConnectionError``, anything else ``APIError``. ``retryable`` follows the verdict, but is ``False``
    once audio reached the emitter: LiveKit's retry would replay the whole turn and the user would hear it
    twice.
    """
    if isinstance(exc, APIError):
        if audio_pushed and exc.retryable:
            exc.retryable = False
        return exc
    verdict = verdict_of(exc)
    message = redact(str(exc) or type(exc).__name__, secrets)
    retryable = verdict.retryable and not audio_pushed
    if isinstance(exc, TTSAPIError):
        body = {
            "provider": exc.provider,
            "error_code": exc.error_code,
            "title": exc.title,
            "context_id": exc.context_id,
            "closes_connection": exc.closes_connection,
            "retry_after": exc.retry_after,
        }
        return APIStatusError(
            message,
            status_code=exc.status_code if exc.status_code is not None else -1,
            request_id=exc.request_id,
            body={k: v for k, v in body.items() if v is not None},
            retryable=retryable,
        )
    ours = isinstance(exc, TTSBridgeError)
    if verdict.category is ErrorCategory.TIMEOUT:
        return APITimeoutError(message if ours else "Request timed out.", retryable=retryable)
    if not ours:
        message = f"{type(exc).__name__}: {message}"
    if verdict.category is ErrorCategory.CONNECTIVITY:
        return APIConnectionError(message, retryable=retryable)
    return APIError(message, retryable=retryable)
