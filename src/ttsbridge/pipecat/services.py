"""Pipecat's side of the provider registry: each provider's Pipecat WebSocket service, by name.

    from ttsbridge.pipecat import build_service

    tts = build_service("kitta", api_key, base_url=url, voice="my-voice", encoding="pcm_s16le", sample_rate=24000)

The provider registry (:mod:`ttsbridge.providers`) sits below the framework adapters and names none of them;
the framework that builds a service by provider name keeps that map itself, here (read by ``ttsbridge demo``
and :func:`ttsbridge.demo.run_demo`). Each factory lives in its provider's thin service module
(``pipecat/<provider>.py``: ``make_service``).
"""

from __future__ import annotations

from typing import Any, Protocol

from ttsbridge.pipecat import kitta, nineninesix
from ttsbridge.pipecat._ws import TurnTTSService

__all__ = ["ServiceFactory", "build_service", "register_service", "unregister_service"]


class ServiceFactory(Protocol):
    def __call__(
        self, api_key: str | None, *, base_url: str, voice: str | None, encoding: str, **kwargs: Any
    ) -> TurnTTSService:
        """The provider's Pipecat WebSocket service speaking with ``voice`` (None: the server's default voice,
        where the API has one); ``encoding``: the wire encoding where the API offers a choice (else ignored);
        ``kwargs``: more service arguments (``sample_rate``, ``text_aggregation_mode``...)."""
        ...


_FACTORIES: dict[str, ServiceFactory] = {"nineninesix": nineninesix.make_service, "kitta": kitta.make_service}


def build_service(
    name: str,
    api_key: str | None,
    *,
    base_url: str,
    voice: str | None,
    encoding: str = "pcm_s16le",
    **kwargs: Any,
) -> TurnTTSService:
    """Provider ``name``'s Pipecat WebSocket service; ValueError naming the providers that have one otherwise."""
    try:
        factory = _FACTORIES[name]
    except KeyError:
        raise ValueError(f"provider must be one of {sorted(_FACTORIES)}, got {name!r}") from None
    return factory(api_key, base_url=base_url, voice=voice, encoding=encoding, **kwargs)


def register_service(name: str, factory: ServiceFactory) -> None:
    """Add (or replace) the Pipecat service of provider ``name`` (registered with
    :func:`ttsbridge.providers.register`), e.g. a provider kept outside this package."""
    _FACTORIES[name] = factory


def unregister_service(name: str) -> None:
    """Remove the Pipecat service of provider ``name`` (registered with :func:`register_service`)."""
    _FACTORIES.pop(name, None)
