"""Pure-function units of the Pipecat adapter: word timing, token coalescing, error classification."""

from __future__ import annotations

import pytest
from pipecat.utils.errors import ErrorCategory

from ttsbridge.errors import TTSAPIError, TTSConnectionError, TTSInvalidOptionError, TTSTimeoutError
from ttsbridge.pipecat._errors import ErrorVerdict, classify

# --- errors ----------------------------------------------------------------------------------------------------


def api_error(code: str, status: int | None) -> TTSAPIError:
    return TTSAPIError("x", provider="nineninesix", error_code=code, status_code=status)


@pytest.mark.parametrize(
    ("code", "status", "category", "fatal"),
    [
        ("unauthorized", 401, ErrorCategory.AUTHENTICATION, True),
        # QUOTA is recoverable in Pipecat 1.14: an account can be topped up, so not fatal
        ("insufficient_credits", 402, ErrorCategory.QUOTA, False),
        ("payment_required", 402, ErrorCategory.QUOTA, False),
        ("voice_not_found", 404, ErrorCategory.INVALID_REQUEST, True),
        ("unknown_model", 400, ErrorCategory.INVALID_REQUEST, True),
        ("model_not_found", None, ErrorCategory.INVALID_REQUEST, True),
        ("unsupported_encoding", 400, ErrorCategory.INVALID_REQUEST, True),
        ("invalid_sample_rate", 400, ErrorCategory.INVALID_REQUEST, True),
        ("concurrent_limit", 429, ErrorCategory.RATE_LIMIT, False),
        ("rate_limited", 429, ErrorCategory.RATE_LIMIT, False),
        ("generation_failed", 500, ErrorCategory.SERVER, False),
        ("not_initialized", 503, ErrorCategory.SERVER, False),
        ("upstream_unavailable", 502, ErrorCategory.SERVER, False),
        ("internal_error", None, ErrorCategory.SERVER, False),
        ("quota_exceeded", None, ErrorCategory.QUOTA, False),  # Kitta: per session; the next starts afresh
        ("invalid_state", None, ErrorCategory.UNKNOWN, False),
        ("forbidden", 403, ErrorCategory.AUTHORIZATION, True),
        ("context_not_found", 404, ErrorCategory.UNKNOWN, False),
        ("missing_context_id", 400, ErrorCategory.UNKNOWN, False),
    ],
)
def test_api_error_classification(
    code: str, status: int | None, category: ErrorCategory, fatal: bool
) -> None:
    verdict = classify(api_error(code, status))
    assert verdict.category is category
    assert verdict.fatal is fatal
    # a non-fatal error must not carry a category Pipecat treats as permanent
    assert fatal or not verdict.category.is_permanent


def test_transport_errors_are_not_fatal() -> None:
    for exc in (TTSConnectionError("dropped"), TTSTimeoutError("slow"), ConnectionResetError()):
        verdict = classify(exc)
        assert verdict.category is ErrorCategory.CONNECTIVITY and not verdict.fatal
    assert classify(RuntimeError("?")).fatal is False
    assert classify(TTSInvalidOptionError("voice", "", "a voice id")).fatal is True


def test_classify_only_translates_the_carried_verdict() -> None:
    from ttsbridge.errors import ErrorCategory as Category
    from ttsbridge.pipecat._errors import PIPECAT_CATEGORY

    assert set(PIPECAT_CATEGORY) == set(Category)
    assert PIPECAT_CATEGORY[Category.TIMEOUT] is ErrorCategory.CONNECTIVITY  # Pipecat has no TIMEOUT
    # a provider's explicit verdict is what Pipecat hears, not a second opinion
    explicit = TTSAPIError("x", provider="p", error_code="generation_failed", status_code=500, fatal=True)
    assert classify(explicit) == ErrorVerdict(ErrorCategory.SERVER, True)
    relabelled = TTSAPIError(
        "x", provider="p", error_code="voice_not_found", category=Category.RATE_LIMIT, fatal=False
    )
    assert classify(relabelled) == ErrorVerdict(ErrorCategory.RATE_LIMIT, False)
