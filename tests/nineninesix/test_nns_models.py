"""Options are validated before any connection, naming the field, the value and the allowed values."""

from __future__ import annotations

import pytest

from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.nineninesix.catalog import derive_urls


@pytest.mark.parametrize(
    ("kw", "field", "allowed"),
    [
        ({"encoding": "mp3"}, "encoding", "pcm_mulaw"),
        ({"sample_rate": 24000}, "sample_rate", "22050"),
        ({"model": "sonic-2"}, "model", "gepard-1.0"),
        ({"voice": "  "}, "voice", "non-empty"),
        ({"speed": 2}, "speed", "known option"),
    ],
)
def test_bad_option_names_field_value_and_allowed(kw: dict[str, object], field: str, allowed: str) -> None:
    with pytest.raises(TTSInvalidOptionError) as info:
        NineninesixOptions(**kw)  # type: ignore[arg-type]
    err = info.value
    assert err.field == field
    assert err.value == next(iter(kw.values()))
    assert allowed in str(err)
    assert not err.retryable


@pytest.mark.parametrize(
    ("out_rate", "wire"), [(8000, 8000), (16000, 16000), (22050, 22050), (24000, 22050), (48000, 22050)]
)
def test_wire_rate_is_one_the_api_has(out_rate: int, wire: int) -> None:
    assert NineninesixOptions().output_format(out_rate).sample_rate == wire
    assert NineninesixOptions(sample_rate=8000).output_format(out_rate).sample_rate == 8000


def test_updated_revalidates() -> None:
    o = NineninesixOptions(voice="a")
    assert o.updated(voice="b").voice == "b"  # type: ignore[attr-defined]
    with pytest.raises(TTSInvalidOptionError):
        o.updated(encoding="pcm_f32le")
    assert o.updated(voice=None).voice is None  # type: ignore[attr-defined]  # back to the default voice
    assert o.updated(language="en").voice == "a"  # type: ignore[attr-defined]  # untouched fields stay


def test_urls_derived_from_one_base() -> None:
    assert derive_urls("https://api.nineninesix.ai") == (
        "https://api.nineninesix.ai",
        "wss://api.nineninesix.ai",
    )
    assert derive_urls("http://127.0.0.1:8765/") == ("http://127.0.0.1:8765", "ws://127.0.0.1:8765")
    assert derive_urls("wss://x.example/v1") == ("https://x.example/v1", "wss://x.example/v1")
    with pytest.raises(TTSInvalidOptionError, match="base_url"):
        derive_urls("ftp://x")


def test_missing_key_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NINENINESIX_API_KEY", raising=False)
    with pytest.raises(TTSInvalidOptionError, match="NINENINESIX_API_KEY"):
        NineninesixTurnProvider()
    monkeypatch.setenv("NINENINESIX_API_KEY", "sk_996_fromenv_0123456789")
    assert "fromenv" not in repr(NineninesixTurnProvider())


async def test_key_never_in_repr() -> None:
    key = "sk_996_supersecretvalue_0123456789"
    provider = NineninesixTurnProvider(api_key=key)
    protocol = provider.endpoint.protocol(NineninesixOptions().output_format(24000))
    for obj in (provider, provider.dialer, provider.dialer.pool, provider.http, provider._dialers, protocol):
        assert "supersecret" not in repr(obj)
    assert "supersecret" not in repr(provider.endpoint) and "supersecret" not in repr(
        protocol.connect_request()
    )
    assert "supersecret" in protocol.connect_request().url  # the spec puts it there; it must stay out of logs
    await provider.aclose()
