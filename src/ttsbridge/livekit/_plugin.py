"""What the ``livekit.plugins.*`` TTS classes share: :class:`PluginTTS`.

A plugin's ``TTS`` only builds its provider (key, options, client settings) and declares its option
arguments; construction of the LiveKit side, ``options``, ``__repr__`` and ``update_options`` live here.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from livekit.agents import tokenize, tts
from livekit.agents.types import NotGivenOr
from livekit.agents.utils import is_given

from ttsbridge.livekit._tts import TurnTTS
from ttsbridge.turns import TurnProvider

__all__ = ["DEFAULT_SAMPLE_RATE", "PluginTTS"]

#: The rate LiveKit receives unless a plugin is told otherwise (the provider resamples to it).
DEFAULT_SAMPLE_RATE = 24000


class PluginTTS(TurnTTS):
    """The shared part of a plugin's ``TTS``; subclasses set the class attributes below."""

    #: ``repr`` prefix (``"nineninesix.TTS"``) and the provider name for metrics (``"Nineninesix"``).
    label: ClassVar[str]
    provider_name: ClassVar[str]
    #: the plugin's logger (``livekit.plugins.<name>``).
    plugin_logger: ClassVar[logging.Logger]
    #: ``update_options`` argument -> provider option field, where they differ (``voice`` -> ``voice_id``).
    option_names: ClassVar[Mapping[str, str]] = {}
    #: option fields shown by ``repr`` besides ``base_url``, ``voice`` and ``model``.
    repr_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        provider: TurnProvider,
        key: str,
        base_url: str,
        sample_rate: int,
        word_timestamps: bool,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer],
        text_pacing: tts.SentenceStreamPacer | bool,
    ) -> None:
        options: Any = getattr(provider, "options")  # noqa: B009  (every provider of a plugin has options)
        super().__init__(
            turn_provider=provider,
            sample_rate=sample_rate,
            model=options.model,
            provider_name=self.provider_name,
            word_timestamps=word_timestamps,
            tokenizer=tokenizer,
            text_pacing=text_pacing,
            logger=self.plugin_logger,
            secrets=(key,),
        )
        self._provider_impl: Any = provider
        self._base_url = base_url

    @property
    def options(self) -> Any:
        """The options the next turn will use."""
        return self._provider_impl.options

    def __repr__(self) -> str:
        o = self.options
        voice = getattr(o, self._field("voice"))
        shown = "".join(f", {name}={getattr(o, name)!r}" for name in self.repr_fields)
        return (
            f"{self.label}(base_url={self._base_url!r}, voice={voice!r}, model={o.model!r}{shown}, "
            f"sample_rate={self.sample_rate})"
        )

    def _field(self, argument: str) -> str:
        return self.option_names.get(argument, argument)

    def _update_given(self, arguments: Mapping[str, Any]) -> None:
        """``update_options`` of a plugin: apply the arguments that were given (``NOT_GIVEN`` ones are left
        alone; ``None`` clears an optional field), under their provider field names."""
        changes = {
            self._field(name): value
            for name, value in arguments.items()
            if name != "self" and not name.startswith("__") and is_given(value)
        }
        self._apply_option_changes(changes, voice_field=self._field("voice"))
