"""The phrase cache's key (pure): every setting that changes the audio changes it, nothing secret is in it,
and the text is normalised as the server trims it. Also the entry's bytes."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest

from ttsbridge.cache import PhraseCache, PhraseEntry, account_scope, normalise_text
from ttsbridge.errors import TTSInvalidOptionError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

KEY = "sk_996_secret_key_for_the_cache_tests"
KITTA_KEY = "kitta-secret-key-for-the-cache-tests"
TEXT = "Hello! How can I help?"


def nns(**kw: Any) -> NineninesixTurnProvider:
    key = kw.pop("api_key", KEY)
    base_url = kw.pop("base_url", "http://127.0.0.1:9")
    return NineninesixTurnProvider(
        key, base_url=base_url, options=NineninesixOptions(**{"voice": "v1", **kw})
    )


def kitta(**kw: Any) -> KittaTurnProvider:
    key = kw.pop("api_key", KITTA_KEY)
    base_url = kw.pop("base_url", "http://127.0.0.1:9")
    opts = {"voice_id": "v1", **kw}
    return KittaTurnProvider(key, base_url=base_url, options=KittaOptions(**opts), standby=False)


CACHE = PhraseCache.memory(max_bytes=1 << 20)


def key(provider: Any, text: str = TEXT, rate: int = 24000, **kw: Any) -> str:
    k = CACHE.key_for(provider, text, sample_rate=rate, **kw)
    assert k is not None
    return k


NNS_VARIANTS = {
    "voice": lambda: nns(voice="v2"),
    "language": lambda: nns(language="de"),
    "encoding": lambda: nns(encoding="pcm_mulaw"),
    "wire rate": lambda: nns(sample_rate=16000),
    "base url": lambda: nns(base_url="http://127.0.0.1:10"),
    "account": lambda: nns(api_key="sk_996_another_account_key"),
}
KITTA_VARIANTS = {
    "voice": {"voice_id": "v2"},
    "model": {"model": "minimax-speech"},
    "speed": {"speed": 1.2},
    "volume": {"volume": 0.5},
    "language": {"language": "de"},
    "emotion": {"emotion": "happy"},
    "chunk_length": {"chunk_length": 150},
    "latency": {"latency": "balanced"},
}


def test_the_nineninesix_key_covers_every_setting_that_changes_the_audio() -> None:
    base = key(nns())
    assert key(nns()) == base  # stable
    for name, make in NNS_VARIANTS.items():
        assert key(make()) != base, name
    assert key(nns(), rate=16000) != base  # the output rate (and with it the wire rate)
    assert key(nns(), rate=48000) != base  # the same wire rate, another output rate
    assert key(nns(), voice="v2") == key(nns(voice="v2"))  # a per-turn override is keyed like an option
    assert key(nns(), "Goodbye!") != base
    assert key(nns(), segments=["Hello!", "How can I help?"]) != base  # sent as two requests: other audio


def test_the_kitta_key_covers_every_request_field() -> None:
    base = key(kitta())
    for name, change in KITTA_VARIANTS.items():
        assert key(kitta(**change)) != base, name
    assert key(kitta(), rate=16000) != base
    qwen = key(kitta(model="qwen-tts"))  # the model whose request has instructions
    assert key(kitta(model="qwen-tts", instructions="Speak slowly.")) != qwen
    assert key(kitta(model="qwen-tts", optimize_instructions=True)) != qwen
    assert key(kitta(sample_rate=16000)) == base  # a synthesize's rate: a turn's is the one opened
    assert key(kitta(speed=1)) == key(kitta(speed=1.0))  # the same request, the same audio
    assert key(kitta(api_key="another-kitta-account")) != base
    assert key(kitta(base_url="http://127.0.0.1:10")) != base


def test_providers_of_different_apis_never_share_a_key() -> None:
    assert key(nns()) != key(kitta())


def test_the_text_is_normalised_as_the_server_trims_it() -> None:
    base = key(nns())
    assert key(nns(), f"  {TEXT}\n ") == base  # trimmed, as the servers trim
    assert key(nns(), "Hello!   How can\n I help?") != base  # inner whitespace is the text's own
    assert key(nns(), "hello! how can i help?") != base  # case is speech
    assert normalise_text(" a \t b\n") == "a \t b"


def test_entries_keyed_by_the_first_recipe_are_never_found() -> None:
    """Version 1 collapsed inner whitespace: its entry for "Hello  there." sits under the key it gave
    "Hello there.". The recipe changed, so its version did: no old entry is found (and played) any more."""
    identity = nns().cache_identity(sample_rate=24000)
    doc = {"v": 1, "identity": identity, "segments": ["Hello there."]}
    v1 = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert key(nns(), "Hello there.") != v1


def test_a_scope_replaces_the_key_digest_so_a_rotated_key_keeps_its_entries() -> None:
    scoped = PhraseCache.memory(max_bytes=1 << 20, scope="acme-prod")
    a = scoped.key_for(nns(), TEXT, sample_rate=24000)
    b = scoped.key_for(nns(api_key="sk_996_rotated_key_of_acme"), TEXT, sample_rate=24000)
    assert a == b
    assert key(nns()) != key(nns(api_key="sk_996_rotated_key_of_acme"))
    with pytest.raises(TTSInvalidOptionError, match="scope"):
        PhraseCache.memory(scope="")


def test_no_secret_reaches_the_identity_the_key_or_an_entry() -> None:
    for provider, secret in ((nns(), KEY), (kitta(), KITTA_KEY)):
        identity = provider.cache_identity(sample_rate=24000)
        assert identity is not None
        assert secret not in repr(identity)
        assert identity["account"] == account_scope(secret) != ""
        assert secret not in key(provider)
    entry = PhraseEntry(text=TEXT, sample_rate=24000, pcm=b"\x01\x00" * 100, provider="nineninesix")
    assert KEY.encode() not in entry.to_bytes()


def test_a_bad_override_is_refused_before_any_lookup() -> None:
    with pytest.raises(TTSInvalidOptionError, match="encoding"):
        CACHE.key_for(nns(), TEXT, sample_rate=24000, encoding="mp3")


def test_the_entry_round_trips_and_foreign_bytes_are_refused() -> None:
    entry = PhraseEntry(
        text="Grüße! 你好",
        sample_rate=16000,
        pcm=bytes(range(256)) * 4,
        provider="kitta",
        wire_format="pcm@44100",
    )
    blob = entry.to_bytes()
    back = PhraseEntry.from_bytes(blob)
    assert back == entry
    assert back.duration == pytest.approx(1024 / 2 / 16000)
    # a hit copies none of the stored audio (seconds of it: the copy was most of the lookup's time)
    assert isinstance(back.pcm, memoryview) and back.pcm.obj is blob
    assert PhraseEntry.from_bytes(back.to_bytes()) == entry
    for bad in (b"", b"TBPC", b"XXXX\x01\x00\x00\x00\x00", entry.to_bytes()[:-1]):
        with pytest.raises(ValueError):
            PhraseEntry.from_bytes(bad)


def test_a_redis_password_is_in_no_repr_and_no_log_line(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("redis")
    cache = PhraseCache.redis("redis://:hunter2-secret@127.0.0.1:9/0", ttl=60)
    assert "hunter2" not in repr(cache) and "127.0.0.1:9" in repr(cache)
    with caplog.at_level(logging.DEBUG, logger="ttsbridge.cache"):
        assert len(cache) == 0  # nothing listens there: a warning, not an exception
    assert caplog.records and not any("hunter2" in r.getMessage() for r in caplog.records)


def test_redis_and_sqlite_arguments_are_checked_up_front(tmp_path: Any) -> None:
    pytest.importorskip("redis")
    with pytest.raises(TTSInvalidOptionError, match="url"):
        PhraseCache.redis("http://127.0.0.1:6379", ttl=60)
    with pytest.raises(TTSInvalidOptionError, match="ttl"):
        PhraseCache.redis("redis://127.0.0.1:6379", ttl=0)
    with pytest.raises(TTSInvalidOptionError, match="path"):
        PhraseCache.sqlite(tmp_path / "missing-dir" / "c.db")
    with pytest.raises(TTSInvalidOptionError, match="busy_timeout"):
        PhraseCache.sqlite(tmp_path / "c.db", busy_timeout=-1)
    with pytest.raises(TTSInvalidOptionError, match="max_bytes"):
        PhraseCache.memory(max_bytes=0)
    for url in ("redis://:pw-456@127.0.0.1:port/0", "redis://:pw-456@[::1/0"):  # not a ValueError of urllib's
        with pytest.raises(TTSInvalidOptionError, match="url") as info:
            PhraseCache.redis(url, ttl=60)
        assert "pw-456" not in str(info.value)
    with pytest.raises(TTSInvalidOptionError, match="timeout"):
        PhraseCache.redis("redis://127.0.0.1:6379", timeout=0)
    for bad in ({"lookup_timeout": 0}, {"store_timeout": "5"}, {"retry_after": -1}, {"max_entry_bytes": 0}):
        (name,) = bad
        with pytest.raises(TTSInvalidOptionError, match=name):
            PhraseCache.memory(**bad)
    assert PhraseCache.memory(retry_after=0).retry_after == 0.0  # (ask again at every turn)
