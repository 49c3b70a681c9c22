"""The provider registry: each provider by name, with what the code outside its package needs of it.

    from ttsbridge import providers

    spec = providers.get("kitta")          # a ProviderSpec; ValueError naming the allowed names otherwise
    provider = spec.turn_provider(os.environ.get(spec.key_env), base_url=spec.default_base_url, voice="v1")

The command line (``ttsbridge say|voices|demo``), the demo and the usage ledger's :func:`billing_rule` find
a provider here instead of naming each one; nothing outside a provider's package, its thin framework classes
and this module names a provider. A spec's facts are read from the provider's own package (its display name,
key variable, base URL, options model and billing rule live there), so :data:`NAMES` is cheap and
:func:`get` imports one provider package, the first time it is asked for. The registry sits below the
framework adapters and names none of them: a framework that builds its service by provider name keeps that
map itself (Pipecat: :func:`ttsbridge.pipecat.build_service`). The emulator, the independent oracle, keeps
its own wiring by the same names (:meth:`ttsbridge.emulator.Emulator.api_key_for`): it never imports a client
package.

Adding a provider: docs/adding-a-provider.md.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # (annotations only: NAMES stays cheap to import for the command line's parser)
    from ttsbridge._options import ProviderOptions
    from ttsbridge.policy.usage import BillingRule
    from ttsbridge.turns import TurnProvider

__all__ = ["NAMES", "ProviderSpec", "billing_rule", "get", "register", "unregister"]


class TurnProviderFactory(Protocol):
    def __call__(
        self, api_key: str | None, *, base_url: str, voice: str | None = None, encoding: str | None = None
    ) -> TurnProvider[Any]:
        """A turn provider for ``base_url`` speaking with ``voice`` (None: the server's default voice, where
        the API has one). ``encoding``: the wire encoding where the API offers a choice (else ignored)."""
        ...


#: ``list_voices(api_key, base_url)``: the voices of the account, as the API lists them.
VoiceLister = Callable[[str | None, str], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class ProviderSpec:
    """What the code outside a provider's package needs of it."""

    #: The registry key: ``TurnProvider.provider``, ``TurnUsage.provider``, ``--provider``.
    name: str
    #: For people (the command line's messages): ``"Nineninesix"`` (``<provider>.models.DISPLAY_NAME``).
    display_name: str
    #: Where the key is read from when none is given.
    key_env: str
    default_base_url: str
    #: The per-turn billing rule (:mod:`ttsbridge.policy.usage`).
    billing: BillingRule
    #: The typed options model (frozen, validated; read by field, changed with ``update_options``).
    options: type[ProviderOptions]
    #: The API has a server-side default voice (else a voice id is required).
    has_default_voice: bool
    turn_provider: TurnProviderFactory
    #: None: the API has no voice listing.
    list_voices: VoiceLister | None = None


def _nineninesix() -> ProviderSpec:
    from ttsbridge.nineninesix.billing import NINENINESIX
    from ttsbridge.nineninesix.catalog import API_KEY_ENV
    from ttsbridge.nineninesix.models import DEFAULT_BASE_URL, DISPLAY_NAME, NineninesixOptions
    from ttsbridge.nineninesix.provider import NineninesixTurnProvider

    def turn_provider(
        api_key: str | None, *, base_url: str, voice: str | None = None, encoding: str | None = None
    ) -> NineninesixTurnProvider:
        fields: dict[str, Any] = {}
        if encoding:
            fields["encoding"] = encoding
        if voice:
            fields["voice"] = voice
        return NineninesixTurnProvider(api_key, base_url=base_url, options=NineninesixOptions(**fields))

    async def list_voices(api_key: str | None, base_url: str) -> list[dict[str, Any]]:
        from ttsbridge.nineninesix.http import NineninesixHTTP

        http = NineninesixHTTP(api_key, base_url=base_url)
        try:
            return await http.list_voices()
        finally:
            await http.aclose()

    return ProviderSpec(
        name=NINENINESIX.provider,
        display_name=DISPLAY_NAME,
        key_env=API_KEY_ENV,
        default_base_url=DEFAULT_BASE_URL,
        billing=NINENINESIX,
        options=NineninesixOptions,
        has_default_voice=True,
        turn_provider=turn_provider,
        list_voices=list_voices,
    )


def _kitta() -> ProviderSpec:
    from ttsbridge.kitta.billing import KITTA
    from ttsbridge.kitta.catalog import API_KEY_ENV
    from ttsbridge.kitta.models import DEFAULT_BASE_URL, DISPLAY_NAME, KittaOptions
    from ttsbridge.kitta.provider import KittaTurnProvider

    def turn_provider(
        api_key: str | None, *, base_url: str, voice: str | None = None, encoding: str | None = None
    ) -> KittaTurnProvider:  # the wire is always PCM: no encoding to choose
        return KittaTurnProvider(api_key, base_url=base_url, options=KittaOptions(voice_id=voice))

    return ProviderSpec(
        name=KITTA.provider,
        display_name=DISPLAY_NAME,
        key_env=API_KEY_ENV,
        default_base_url=DEFAULT_BASE_URL,
        billing=KITTA,
        options=KittaOptions,
        has_default_voice=False,
        turn_provider=turn_provider,
    )


_LOADERS: dict[str, Callable[[], ProviderSpec]] = {"nineninesix": _nineninesix, "kitta": _kitta}

#: Every registered provider's name, the default (``nineninesix``) first.
NAMES: tuple[str, ...] = tuple(_LOADERS)


@functools.cache
def get(name: str) -> ProviderSpec:
    """The spec of provider ``name``; ValueError naming the registered providers otherwise."""
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise ValueError(f"provider must be one of {sorted(NAMES)}, got {name!r}") from None
    return loader()


def register(name: str, loader: Callable[[], ProviderSpec]) -> None:
    """Add provider ``name`` (``loader`` returns its spec, importing its package), e.g. a provider kept outside
    this package; it joins :data:`NAMES`."""
    global NAMES
    _LOADERS[name] = loader
    NAMES = tuple(_LOADERS)
    get.cache_clear()


def unregister(name: str) -> None:
    """Remove provider ``name`` (registered with :func:`register`)."""
    global NAMES
    _LOADERS.pop(name, None)
    NAMES = tuple(_LOADERS)
    get.cache_clear()


def billing_rule(provider: str) -> BillingRule:
    """The billing rule of ``provider`` (``"nineninesix"``, ``"kitta"``)."""
    return get(provider).billing
