"""Proxies and certificates on every surface: the Nineninesix WebSocket, SSE, bytes and voices, and Kitta,
through a real CONNECT proxy on loopback (it must see each tunnel; ``NO_PROXY`` bypasses it; an explicit
``proxy=`` wins over the environment), over ``wss://`` / ``https://`` with a test CA trusted through
``SSL_CERT_FILE``; a certificate that fails verification is a typed, permanent error naming the host."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from connect_proxy import ConnectProxy
from prod_helpers import one_turn, server_context

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.engine.tls import TTSCertificateError
from ttsbridge.errors import TTSBridgeError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

BOUND = 15.0
SURFACES = ("websocket", "sse", "bytes", "voices", "kitta")


@pytest.fixture
async def tls_emulator(ca: trustme.CA) -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID), ssl_context=server_context(ca)) as emu:
        yield emu


@pytest.fixture
def trust_ca(ca_file: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = ca_file
    monkeypatch.setenv("SSL_CERT_FILE", str(path))
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "WSS_PROXY", "WS_PROXY", "NO_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return path


async def speak_everywhere(emu: Emulator, **proxy: Any) -> dict[str, int]:
    """One call on every surface (each must work); the bytes of audio each gave."""
    nns = NineninesixTurnProvider(
        emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID), **proxy
    )
    kitta = KittaTurnProvider(
        emu.api_key_for("kitta"),
        base_url=emu.base_url,
        options=KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash"),
        standby=False,
        **proxy,
    )
    out: dict[str, int] = {}
    try:
        out["websocket"] = len(await one_turn(nns))
        out["sse"] = len(b"".join([pcm async for pcm in nns.synthesize("Hello there.", sample_rate=24000)]))
        out["bytes"] = len(
            await asyncio.wait_for(nns.http.tts_bytes("Hello there.", voice=TONE_VOICE_ID), BOUND)
        )
        out["voices"] = len(await asyncio.wait_for(nns.http.list_voices(), BOUND))
        out["kitta"] = len(await one_turn(kitta))
    finally:
        await nns.aclose()
        await kitta.aclose()
    return out


async def test_every_surface_over_tls_with_a_ca_from_ssl_cert_file(
    tls_emulator: Emulator, trust_ca: Path
) -> None:
    assert tls_emulator.base_url.startswith("https://")
    got = await speak_everywhere(tls_emulator)
    assert all(got[s] > 0 for s in SURFACES), got
    assert [r.api for r in tls_emulator.stats.connections] == ["nineninesix", "kitta"]


async def test_every_surface_goes_through_the_environments_proxy(
    tls_emulator: Emulator, trust_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        got = await speak_everywhere(tls_emulator)
        assert all(got[s] > 0 for s in SURFACES), got
    target = f"127.0.0.1:{tls_emulator.port}"
    # the WebSocket and the Kitta session are a tunnel each; the HTTP calls at least one (keep-alive reuses)
    assert proxy.tunnels.count(target) >= 3 and set(proxy.tunnels) == {target}, proxy.tunnels
    assert not proxy.refused


async def test_wss_proxy_is_read_for_the_websockets(
    tls_emulator: Emulator, trust_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ConnectProxy() as proxy:
        monkeypatch.setenv("WSS_PROXY", proxy.url)
        nns = NineninesixTurnProvider(
            tls_emulator.api_key,
            base_url=tls_emulator.base_url,
            options=NineninesixOptions(voice=TONE_VOICE_ID),
        )
        try:
            assert await one_turn(nns)
        finally:
            await nns.aclose()
    assert proxy.tunnels == [f"127.0.0.1:{tls_emulator.port}"]


async def test_no_proxy_bypasses_the_proxy_on_every_surface(
    tls_emulator: Emulator, trust_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ConnectProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        got = await speak_everywhere(tls_emulator)
        assert all(got[s] > 0 for s in SURFACES), got
    assert proxy.tunnels == []


async def test_an_explicit_proxy_wins_over_the_environment(
    tls_emulator: Emulator, trust_ca: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ConnectProxy() as proxy, ConnectProxy() as other:
        monkeypatch.setenv("HTTPS_PROXY", other.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")  # the explicit one wins over NO_PROXY too
        got = await speak_everywhere(tls_emulator, proxy=proxy.url)
        assert all(got[s] > 0 for s in SURFACES), got
        assert len(proxy.tunnels) >= 3 and other.tunnels == []
        proxy.tunnels.clear()
        monkeypatch.delenv("NO_PROXY")
        got = await speak_everywhere(tls_emulator, proxy=None)  # None: direct, whatever the environment says
        assert all(got[s] > 0 for s in SURFACES), got
        assert proxy.tunnels == [] and other.tunnels == []


async def test_an_untrusted_certificate_is_a_typed_permanent_error_naming_the_host(
    tls_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)  # the system store: it does not know the test CA
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    key = tls_emulator.api_key
    nns = NineninesixTurnProvider(
        key, base_url=tls_emulator.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID)
    )
    kitta = KittaTurnProvider(
        tls_emulator.api_key_for("kitta"),
        base_url=tls_emulator.base_url,
        options=KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash"),
        standby=False,
    )
    errors: list[BaseException] = []
    try:
        for call in (
            lambda: one_turn(nns),
            lambda: nns.http.tts_bytes("Hello there.", voice=TONE_VOICE_ID),
            lambda: nns.http.list_voices(),
            lambda: one_turn(kitta),
        ):
            with pytest.raises(TTSBridgeError) as info:
                await asyncio.wait_for(call(), BOUND)
            errors.append(info.value)
    finally:
        await nns.aclose()
        await kitta.aclose()
    for err in errors:
        assert isinstance(err, TTSCertificateError), repr(err)
        assert err.host == "127.0.0.1" and not err.retryable and err.fatal
        assert "127.0.0.1" in str(err) and "SSL_CERT_FILE" in str(err)
        chain: list[BaseException] = []
        seen: BaseException | None = err
        while seen is not None and len(chain) < 10:
            chain.append(seen)
            seen = seen.__cause__ or seen.__context__
        for e in chain:
            assert key not in str(e) and key not in repr(e) and all(key not in str(a) for a in e.args)
            assert all(key not in str(v) for v in vars(e).values())
    assert tls_emulator.stats.connections == []  # no upgrade ever reached the server


async def test_a_bad_proxy_setting_is_refused_naming_the_field(tls_emulator: Emulator) -> None:
    from ttsbridge.errors import TTSInvalidOptionError

    with pytest.raises(TTSInvalidOptionError) as info:
        NineninesixTurnProvider(tls_emulator.api_key, base_url=tls_emulator.base_url, proxy="proxy.corp:3128")
    assert info.value.field == "proxy"
    with pytest.raises(TTSInvalidOptionError):
        KittaTurnProvider(
            tls_emulator.api_key_for("kitta"),
            base_url=tls_emulator.base_url,
            options=KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash"),
            proxy=3128,
        )
