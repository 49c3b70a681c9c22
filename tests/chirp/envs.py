"""The providers the shared adapter suites run (tests/pipecat/test_pipecat_shared.py,
tests/livekit/test_livekit_shared.py, tests/test_turns_shared.py): Nineninesix and Kitta against the emulator,
and Chirp (tests/chirp: a third provider written only against the engine and the registry) against its own
loopback server. Nothing in the suites branches on the provider but the text that makes its server fail or
stall."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

import chirp
from chirp.server import ChirpServer
from ttsbridge import providers
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.turns import TurnProvider

NAMES = ["nineninesix", "kitta", "chirp"]
RATE = 24000
FAIL = {
    "nineninesix": "[[error:generation_failed]]",
    "kitta": "[[kitta:error=internal_error]]",
    "chirp": "[[error]]",
}
STALL = {"nineninesix": "[[stall]]", "kitta": "[[kitta:stall]]", "chirp": "[[stall]]"}


@dataclass
class Env:
    """One provider, as the registry gives it, pointed at its server."""

    name: str
    spec: providers.ProviderSpec
    api_key: str | None
    base_url: str

    @property
    def voice(self) -> str:
        return "chirp" if self.name == "chirp" else TONE_VOICE_ID

    def turn_provider(self, base_url: str | None = None) -> TurnProvider[Any]:
        """The provider, pointed at its server (or at ``base_url``)."""
        return self.spec.turn_provider(self.api_key, base_url=base_url or self.base_url, voice=self.voice)

    def pipecat(self) -> Any:
        from chirp import services  # (imports Pipecat: only the Pipecat suite asks for a service)
        from ttsbridge.pipecat import build_service

        services.register()  # beside the built-in providers' (idempotent)
        url, voice = self.base_url, self.voice
        return build_service(
            self.name, self.api_key, base_url=url, voice=voice, encoding="pcm_s16le", sample_rate=RATE
        )


@pytest.fixture(params=NAMES)
async def env(request: pytest.FixtureRequest, emulator: Emulator) -> AsyncIterator[Env]:
    name = request.param
    if name != "chirp":
        yield Env(name, providers.get(name), emulator.api_key_for(name), emulator.base_url)
        return
    chirp.register()
    try:
        async with ChirpServer() as srv:
            yield Env(name, providers.get(name), None, srv.url)
    finally:
        providers.unregister("chirp")
