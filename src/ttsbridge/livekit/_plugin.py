"""What the ``livekit.plugins.*`` TTS classes share: :class:`PluginTTS`.

A plugin's ``TTS`` only builds its provider (key, options, client settings) and declares its option
arguments (its ``update_options`` names each provider option field it changes); construction of the LiveKit
side, the typed ``options``, ``__repr__`` and applying an options change live here.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Generic

from livekit.agents import tokenize, tts
from livekit.agents.types import NotGivenOr
from livekit.agents.utils import is_given

from ttsbridge.cache import PhraseCache
from ttsbridge.livekit._tts import TurnTTS
from ttsbridge.turns import OptionsT, TurnProvider

__all__ = ["DEFAULT_SAMPLE_RATE", "PluginTTS", "given"]

#: The rate LiveKit receives unless a plugin is told otherwise (the provider resamples to it).
DEFAULT_SAMPLE_RATE = 24000


class PluginTTS(TurnTTS, Generic[OptionsT]):
    """The shared part of a plugin's ``TTS``; subclasses set the class attributes below."""

    #: ``repr`` prefix (``"nineninesix.TTS"``) and the provider name for metrics (``"Nineninesix"``).
    label: ClassVar[str]
    provider_name: ClassVar[str]
    #: the plugin's logger (``livekit.plugins.<name>``).
    plugin_logger: ClassVar[logging.Logger]

    def __init__(
        self,
        provider: TurnProvider[OptionsT],
        key: str,
        base_url: str,
        sample_rate: int,
        word_timestamps: bool,
        tokenizer: NotGivenOr[tokenize.SentenceTokenizer],
        text_pacing: tts.SentenceStreamPacer | bool,
        phrase_cache: PhraseCache | None,
    ) -> None:
        super().__init__(
            turn_provider=provider,
            sample_rate=sample_rate,
            model=provider.options.model,
            provider_name=self.provider_name,
            word_timestamps=word_timestamps,
            tokenizer=tokenizer,
            text_pacing=text_pacing,
            logger=self.plugin_logger,
            secrets=(key,),
            phrase_cache=phrase_cache,
        )
        self._provider_impl: TurnProvider[OptionsT] = provider
        self._base_url = base_url

    @property
    def options(self) -> OptionsT:
        """The options the next turn will use (the provider's typed options model)."""
        return self._provider_impl.options

    def __repr__(self) -> str:
        o = self.options
        return (
            f"{self.label}(base_url={self._base_url!r}, voice={o.voice!r}, model={o.model!r}"
            f"{self._repr_options(o)}, sample_rate={self.sample_rate})"
        )

    def _repr_options(self, options: OptionsT) -> str:
        """Options ``repr`` shows besides ``base_url``, ``voice`` and ``model`` (``", encoding='pcm_mulaw'"``)."""
        return ""


def given(**arguments: Any) -> dict[str, Any]:
    """The ``update_options`` arguments that were given, by provider option field (``NOT_GIVEN`` ones are
    left out; ``None`` clears an optional field)."""
    return {name: value for name, value in arguments.items() if is_given(value)}
