"""What the LiveKit streams read from the TTS that made them: :class:`StreamOwner`, the base of
:class:`~ttsbridge.livekit.TurnTTS`.

Declared apart so that ``_stream.py`` and ``_chunked.py`` need not import ``_tts.py``, which builds them (no
import cycle); :class:`~ttsbridge.livekit.TurnTTS` sets these attributes in its constructor.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from livekit.agents import tokenize, tts

from ttsbridge._redact import redact
from ttsbridge.cache import CachedProvider
from ttsbridge.livekit._usage import TurnUsageEvents
from ttsbridge.policy.words import SpeechRate
from ttsbridge.turns import TurnProvider

__all__ = ["StreamOwner"]


class StreamOwner(TurnUsageEvents, tts.TTS):
    """A LiveKit TTS over a :class:`TurnProvider`, as its streams see it."""

    _turn_provider: TurnProvider
    #: The provider wrapped by the phrase cache, for whole known texts (None: no ``phrase_cache``).
    _phrases: CachedProvider | None
    _word_timestamps: bool
    _sentence_tokenizer: tokenize.SentenceTokenizer
    _stream_pacer: tts.SentenceStreamPacer | None
    _speech_rate: SpeechRate
    _logger: logging.Logger
    _secrets: tuple[str, ...]
    #: Once a turn's audio is safely ahead of real-time playback (a server faster than real time), read it
    #: less often and push what arrived meanwhile as one buffer (:class:`~ttsbridge.policy.chunks.Playout`;
    #: the first audio is never held). ``False`` pushes every chunk as it comes.
    hold_when_ahead: ClassVar[bool] = True

    def _redact(self, text: object) -> str:
        return redact(text, self._secrets)

    def _open_turn_kwargs(self) -> dict[str, Any]:
        """Per-turn overrides passed to ``open_turn`` (none by default; options live in the provider)."""
        return {}
