"""Pure-function tests of the LiveKit adapter: word-timing estimate and error mapping."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import APIConnectionError, APIError, APIStatusError, APITimeoutError

from ttsbridge.errors import (
    TTSAPIError,
    TTSBridgeError,
    TTSConnectionError,
    TTSInvalidOptionError,
    TTSTimeoutError,
)
from ttsbridge.livekit import to_api_error

KEY = "sk_996_secretsecret123"


# --- errors -------------------------------------------------------------------------------------------------


def _api_error(code: str, status: int | None, retryable: bool) -> TTSAPIError:
    return TTSAPIError(
        f"failed on wss://x/tts/websocket?api_key={KEY}",
        provider="nineninesix",
        error_code=code,
        status_code=status,
        retryable=retryable,
        request_id="req_1",
        context_id="ctx_1",
    )


@pytest.mark.parametrize(
    ("code", "status", "retryable", "expect_retryable"),
    [
        ("generation_failed", 500, True, True),
        ("concurrent_limit", 429, True, True),
        ("voice_not_found", 404, False, False),
        ("not_initialized", 503, True, True),
        ("rate_limited", None, True, True),
    ],
)
def test_api_error_maps_to_status_error(
    code: str, status: int | None, retryable: bool, expect_retryable: bool
) -> None:
    err = to_api_error(_api_error(code, status, retryable), audio_pushed=False, secrets=(KEY,))
    assert isinstance(err, APIStatusError)
    assert err.status_code == (status if status is not None else -1)
    assert err.request_id == "req_1"
    assert err.retryable is expect_retryable
    assert err.body["error_code"] == code  # type: ignore[index]
    assert err.body["context_id"] == "ctx_1"  # type: ignore[index]
    assert KEY not in str(err) and KEY not in repr(err)


def test_nothing_is_retryable_once_audio_was_pushed() -> None:
    for exc in (
        _api_error("generation_failed", 500, True),
        TTSConnectionError("dropped"),
        TTSTimeoutError("slow"),
        asyncio.TimeoutError(),
        APIConnectionError("x"),
    ):
        err = to_api_error(exc, audio_pushed=True)
        assert err.retryable is False, exc


def test_error_types() -> None:
    assert type(to_api_error(TTSConnectionError("x"), audio_pushed=False)) is APIConnectionError
    assert type(to_api_error(TTSTimeoutError("x"), audio_pushed=False)) is APITimeoutError
    assert type(to_api_error(asyncio.TimeoutError(), audio_pushed=False)) is APITimeoutError
    assert to_api_error(TTSConnectionError("x"), audio_pushed=False).retryable is True
    bad = to_api_error(TTSInvalidOptionError("voice", "", "an id"), audio_pushed=False)
    assert type(bad) is APIError and bad.retryable is False
    other = to_api_error(TTSBridgeError("turn is over", retryable=False), audio_pushed=False)
    assert type(other) is APIError and other.retryable is False
    bug = to_api_error(RuntimeError(f"boom {KEY}"), audio_pushed=False)
    assert bug.retryable is False and KEY not in str(bug)


def test_connection_error_text_is_redacted() -> None:
    exc = ConnectionRefusedError(f"cannot connect to ws://127.0.0.1:1/tts/websocket?api_key={KEY}&x=1")
    err = to_api_error(exc, audio_pushed=False, secrets=(KEY,))
    assert isinstance(err, APIConnectionError)
    assert KEY not in str(err) and KEY not in repr(err)


def test_error_type_follows_the_carried_category() -> None:
    from ttsbridge.errors import ErrorCategory

    timed_out = to_api_error(
        TTSBridgeError("x", category=ErrorCategory.TIMEOUT, retryable=True), audio_pushed=False
    )
    assert type(timed_out) is APITimeoutError and timed_out.retryable is True
    lost = to_api_error(TTSBridgeError("x", category=ErrorCategory.CONNECTIVITY), audio_pushed=False)
    assert type(lost) is APIConnectionError and lost.retryable is False
    # fatal is Pipecat's concern; LiveKit's retry follows retryable only
    fatal = TTSAPIError("x", provider="p", error_code="generation_failed", retryable=True, fatal=True)
    assert to_api_error(fatal, audio_pushed=False).retryable is True
