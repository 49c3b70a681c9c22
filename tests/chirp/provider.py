"""Chirp as a :class:`~ttsbridge.turns.TurnProvider`: typed options, which dialer (the engine's shared one:
every turn on one pooled connection), the engine's turn, and its entry in the registry. Everything that is a
turn (send, end, cancel, audio, resampling, take_ready, the deadline) is
:class:`~ttsbridge.engine.turn.EngineTurn`'s; everything that is a connection (connect, keepalive, pool) is the
engine's :class:`~ttsbridge.engine.connection.Connection`."""

from __future__ import annotations

import uuid
from typing import Any

from chirp.protocol import ChirpProtocol, ChirpRequest
from ttsbridge import providers
from ttsbridge._options import StrictOptions
from ttsbridge.engine.dialers import SharedDialer
from ttsbridge.engine.settings import ConnectionSettings
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.policy.usage import FAILED_BY_SERVER, FAILED_LOCALLY, Billed, BillingRule
from ttsbridge.turns import TurnProvider

#: Every text sent is billed, also when cancelled; refunded when the server fails the turn.
_ENDED = {
    "done": Billed.ALL,
    "cancelled": Billed.ALL,
    FAILED_BY_SERVER: Billed.NONE,
    FAILED_LOCALLY: Billed.ALL,
}
CHIRP = BillingRule(provider="chirp", unit_per_send=True, open=Billed.ALL, ended=_ENDED)


class ChirpOptions(StrictOptions):
    voice: str | None = "chirp"
    model: str = "chirp-1"


class ChirpTurnProvider(TurnProvider[ChirpOptions]):
    provider = "chirp"

    def __init__(
        self, url: str, *, options: ChirpOptions | None = None, timeout: float = 5.0, **settings: Any
    ) -> None:
        self._options = options or ChirpOptions()
        self.url, self.timeout = url, timeout
        self.dialer: SharedDialer[str] = SharedDialer(
            lambda _key: ChirpProtocol(url, timeout),
            ConnectionSettings().replace(**settings),  # the engine's defaults (connect_timeout=...)
            key=lambda _request: "chirp",
            name="chirp",
        )

    @property
    def options(self) -> ChirpOptions:
        return self._options

    def update_options(self, **options: Any) -> None:
        self._options = self._options.updated(**options)  # type: ignore[assignment]

    async def open_turn(
        self, *, sample_rate: int, timeout: float | None = None, **overrides: Any
    ) -> EngineTurn:
        opts = self._options.updated(**overrides) if overrides else self._options
        request = ChirpRequest(voice=opts.voice or "chirp", timeout=timeout)
        turn = EngineTurn(
            self.dialer, request, turn_id=str(uuid.uuid4()), sample_rate=sample_rate, timeout=timeout
        )
        return await turn.open()

    async def aclose(self) -> None:
        await self.dialer.aclose()


def _spec() -> providers.ProviderSpec:
    def turn_provider(api_key: Any, *, base_url: str, voice: Any = None, encoding: Any = None) -> Any:
        return ChirpTurnProvider(base_url, options=ChirpOptions(voice=voice or "chirp"))

    return providers.ProviderSpec(
        name="chirp", display_name="Chirp", key_env="CHIRP_API_KEY", default_base_url="ws://127.0.0.1/chirp",
        billing=CHIRP, options=ChirpOptions, has_default_voice=True,
        turn_provider=turn_provider,
    )  # fmt: skip


SPEC = _spec()


def register() -> None:
    """Put Chirp into the registry (``providers.get("chirp")``), as a provider package would."""
    providers.register("chirp", lambda: SPEC)
