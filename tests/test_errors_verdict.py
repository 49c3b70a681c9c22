"""The error verdict (category, retryable, fatal) each ttsbridge error carries, decided once for every
framework: a table of errors and the verdict they must carry."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from ttsbridge.errors import (
    ErrorCategory,
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSSilentConnectionError,
    TTSTimeoutError,
    Verdict,
    verdict_of,
)
from ttsbridge.nineninesix.models import ErrorMessage
from ttsbridge.nineninesix.protocol import ERROR_CATALOG, api_error

C = ErrorCategory
#: Categories a framework (Pipecat's ``is_permanent``) treats as permanent whatever ``fatal`` says.
PERMANENT = {C.AUTHENTICATION, C.AUTHORIZATION, C.INVALID_REQUEST}


def server(code: str, status: int | None, retryable: bool = False) -> TTSAPIError:
    return TTSAPIError("x", provider="kitta", error_code=code, status_code=status, retryable=retryable)


TABLE: list[tuple[BaseException, Verdict]] = [
    # server errors: the code decides, else the status
    (server("unauthorized", 401), Verdict(C.AUTHENTICATION, False, True)),
    (server("invalid_api_key", None), Verdict(C.AUTHENTICATION, False, True)),
    (server("http_error", 401), Verdict(C.AUTHENTICATION, False, True)),
    (server("forbidden", None), Verdict(C.AUTHORIZATION, False, True)),
    (server("not_found", 403), Verdict(C.AUTHORIZATION, False, True)),
    (server("insufficient_credits", 402), Verdict(C.QUOTA, False, False)),  # can be topped up
    (server("payment_required", 402), Verdict(C.QUOTA, False, False)),
    (server("quota_exceeded", None), Verdict(C.QUOTA, False, False)),  # Kitta: per session
    (server("something_new", 402), Verdict(C.QUOTA, False, False)),
    (server("voice_not_found", 404), Verdict(C.INVALID_REQUEST, False, True)),
    (server("UNKNOWN_MODEL", 400), Verdict(C.INVALID_REQUEST, False, True)),  # codes compare lowercased
    (server("unsupported_format", None), Verdict(C.INVALID_REQUEST, False, True)),
    (server("concurrent_limit", 429, True), Verdict(C.RATE_LIMIT, True, False)),
    (server("something_new", 429, True), Verdict(C.RATE_LIMIT, True, False)),
    (server("rate_limited", None, True), Verdict(C.RATE_LIMIT, True, False)),
    (server("generation_failed", 500, True), Verdict(C.SERVER, True, False)),
    (server("internal_error", None), Verdict(C.SERVER, False, False)),
    (server("something_new", 502, True), Verdict(C.SERVER, True, False)),
    (server("something_new", None, True), Verdict(C.SERVER, True, False)),  # retryable: the server's fault
    (server("context_not_found", 404), Verdict(C.UNKNOWN, False, False)),  # this turn only
    (server("missing_context_id", 400), Verdict(C.UNKNOWN, False, False)),
    (server("invalid_state", None), Verdict(C.UNKNOWN, False, False)),
    # our own errors
    (TTSConnectionError("dropped"), Verdict(C.CONNECTIVITY, True, False)),
    (TTSConnectionError("client is closed", retryable=False), Verdict(C.CONNECTIVITY, False, False)),
    (TTSTimeoutError("slow"), Verdict(C.TIMEOUT, True, False)),
    (TTSSilentConnectionError("a ping unanswered"), Verdict(C.TIMEOUT, True, False)),
    (TTSSilentConnectionError("kitta: uncertain", retryable=False), Verdict(C.TIMEOUT, False, False)),
    (TTSInvalidOptionError("voice", "", "a voice id"), Verdict(C.INVALID_REQUEST, False, True)),
    (TTSBridgeError("turn is over"), Verdict(C.UNKNOWN, False, False)),
    # from below: transport failures are retryable, anything else is a bug
    (asyncio.TimeoutError(), Verdict(C.TIMEOUT, True, False)),
    (TimeoutError(), Verdict(C.TIMEOUT, True, False)),
    (ConnectionResetError(), Verdict(C.CONNECTIVITY, True, False)),
    (OSError("unreachable"), Verdict(C.CONNECTIVITY, True, False)),
    (RuntimeError("?"), Verdict(C.UNKNOWN, False, False)),
    (ValueError("?"), Verdict(C.UNKNOWN, False, False)),
]


@pytest.mark.parametrize(("exc", "expected"), TABLE, ids=[f"{type(e).__name__}-{e}"[:60] for e, _ in TABLE])
def test_verdict_table(exc: BaseException, expected: Verdict) -> None:
    assert verdict_of(exc) == expected
    if isinstance(exc, TTSBridgeError):  # carried on the error itself
        assert (exc.category, exc.retryable, exc.fatal) == (
            expected.category,
            expected.retryable,
            expected.fatal,
        )
    # a framework that treats a category as permanent must never get one for a non-fatal error
    assert expected.fatal or expected.category not in PERMANENT


def test_an_explicit_verdict_wins_over_the_table() -> None:
    err = TTSAPIError(
        "x", provider="p", error_code="generation_failed", status_code=500, fatal=True, category=C.APPLICATION
    )
    assert verdict_of(err) == Verdict(C.APPLICATION, False, True)
    assert TTSAPIError("x", provider="p", error_code="voice_not_found", fatal=False).fatal is False
    assert TTSBridgeError("x", category=C.TIMEOUT, fatal=True).verdict == Verdict(C.TIMEOUT, False, True)


@pytest.mark.parametrize("code", sorted(ERROR_CATALOG))
def test_nineninesix_errors_carry_the_catalog_effect(code: str) -> None:
    effect = ERROR_CATALOG[code]
    err = api_error(ErrorMessage(error_code=code, context_id="c1"))
    assert (err.retryable, err.fatal, err.closes_connection) == (
        effect.retryable,
        effect.fatal,
        effect.closes_socket,
    )
    assert err.fatal or err.category not in PERMANENT


def test_nineninesix_out_of_credits_is_not_fatal() -> None:
    # a 402 closes the socket, but the account can be topped up mid-call: the next turn may speak
    err = api_error(ErrorMessage(error_code="insufficient_credits", status_code=402))
    assert err.verdict == Verdict(C.QUOTA, False, False)


def test_nineninesix_catalog_fatal_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    # the table and the catalog agree today; a catalog entry that says otherwise is what the error carries
    monkeypatch.setitem(
        ERROR_CATALOG, "generation_failed", replace(ERROR_CATALOG["generation_failed"], fatal=True)
    )
    assert api_error(ErrorMessage(error_code="generation_failed")).verdict == Verdict(C.SERVER, True, True)


def test_nineninesix_unknown_codes_take_the_table_verdict() -> None:
    # the catalog's fallback for an unknown code is a guess by status; the table knows the code
    auth = api_error(ErrorMessage(error_code="invalid_api_key"))
    assert (auth.category, auth.fatal) == (C.AUTHENTICATION, True)
    assert api_error(ErrorMessage(error_code="something_new", status_code=402)).verdict == Verdict(
        C.QUOTA, False, False
    )
