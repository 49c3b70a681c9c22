"""Key redaction: what may hold a URL or a key is masked before it is logged or raised."""

from __future__ import annotations

import logging

import pytest

from ttsbridge._logging import RedactingLogger
from ttsbridge._redact import mask_key, redact
from ttsbridge.errors import TTSAPIError, TTSConnectionError

KEY = "sk_996_Zx9secretvalue_0123456789"


@pytest.mark.parametrize(
    "text",
    [
        f"wss://api.nineninesix.ai/tts/websocket?api_key={KEY}&cancel_ack=true",
        f"GET /tts/websocket?cancel_ack=true&api_key={KEY} HTTP/1.1",
        f"Authorization: Bearer {KEY}",
        f"the key {KEY} appears bare",
        f"'{KEY}'",
    ],
)
def test_keys_are_masked(text: str) -> None:
    out = redact(text)
    assert "secretvalue" not in out
    assert "***" in out


def test_other_secrets_and_plain_text() -> None:
    assert redact("token kitta-abcdef is here", ["kitta-abcdef"]) == "token *** is here"
    assert redact("invalid api_key=None; allowed") == "invalid api_key=None; allowed"
    assert redact("cancel_ack=true&x=1") == "cancel_ack=true&x=1"
    assert mask_key(KEY) == repr("sk_996_…") and mask_key(None) == "None"


def test_errors_redact_their_text() -> None:
    err = TTSConnectionError(f"cannot connect to ws://h/tts/websocket?api_key={KEY}")
    assert "secretvalue" not in str(err) and "secretvalue" not in repr(err)
    api = TTSAPIError(f"server echoed {KEY}", provider="nineninesix", error_code="x", status_code=400)
    assert "secretvalue" not in str(api)


def test_redacting_logger(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    log = RedactingLogger(logging.getLogger("test.redact"), ("kitta-secret-1",))
    log.debug("> GET %s HTTP/1.1", f"/tts/websocket?api_key={KEY}")
    log.info("auth with %s", "kitta-secret-1")
    try:
        raise OSError(f"refused ws://h/?api_key={KEY}")
    except OSError:
        log.warning("failed", exc_info=True)
    assert "secretvalue" not in caplog.text and "kitta-secret-1" not in caplog.text
    assert len(caplog.records) == 3


def test_a_providers_key_is_masked_everywhere_once_registered() -> None:
    from ttsbridge.kitta import KittaOptions, KittaTurnProvider

    key = "kt-registered-without-prefix-42"
    KittaTurnProvider(key, options=KittaOptions(voice_id="v"), standby=False)
    err = TTSAPIError(f"server said: bad token {key}", provider="kitta", error_code="unauthorized")
    assert key not in str(err)
    assert key not in redact(f"anything {key} anywhere")
