"""What the LiveKit streams read from the TTS that made them: :class:`StreamOwner`, the base of
:class:`~ttsbridge.livekit.TurnTTS`.

Declared apart so that ``_stream.py`` and ``_chunked.py`` need not import ``_tts.py``, which builds them (no
import cycle); :class:`~ttsbridge.livekit.TurnTTS` sets these attributes in its constructor.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, ClassVar

from livekit.agents import tokenize, tts

from ttsbridge._redact import redact
from ttsbridge.cache import CachedProvider
from ttsbridge.livekit._usage import TurnUsageEvents
from ttsbridge.policy.words import SpeechRate
from ttsbridge.text.adapter import SpokenForm
from ttsbridge.text.spans import Normalized
from ttsbridge.text.stream import StreamNormalizer
from ttsbridge.turns import TurnProvider

if TYPE_CHECKING:
    from ttsbridge.text.normalizer import TextNormalizer

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
    #: the voice normalizer (:mod:`ttsbridge.text`); None: text is sent as written
    _spoken: SpokenForm
    #: Once a turn's audio is safely ahead of real-time playback (a server faster than real time), read it
    #: less often and push what arrived meanwhile as one buffer (:class:`~ttsbridge.policy.chunks.Playout`;
    #: the first audio is never held). ``False`` pushes every chunk as it comes.
    hold_when_ahead: ClassVar[bool] = True

    def _redact(self, text: object) -> str:
        return redact(text, self._secrets)

    @property
    def text_normalizer(self) -> TextNormalizer | None:
        """The voice normalizer (its ``lexicon`` may be changed at run time); None when it is off."""
        return self._spoken.normalizer

    def _text_stream(self) -> StreamNormalizer:
        """A new turn's normalizer, for the provider's current voice and language (off: a pass-through)."""
        return self._spoken.stream()

    def spoken_form(self, text: str) -> Normalized:
        """A whole known text in its spoken form, with the map (``synthesize()``)."""
        return self._spoken.whole(text)

    def known_phrase_segments(self, text: str) -> list[str]:
        """How ``stream()`` sends a text known whole (``say()``): each sentence of the tokenizer, with a space
        after it, in its spoken form (the phrase cache's key; :meth:`PhraseCache.warm`)."""
        return [p.spoken for p in self._known_phrase(text)] or [text]

    def _known_phrase(self, text: str) -> list[Normalized]:
        stream = self._text_stream()
        pieces = [stream.push(s + " ", whole=True) for s in self._sentence_tokenizer.tokenize(text)]
        rest = stream.flush()
        if rest and pieces:
            pieces[-1] = pieces[-1] + rest
        return [p for p in pieces if p.sendable]

    async def _warm_normalizer(self) -> None:
        """Import the normalizer's rules now (prewarm), not on the first sentence that needs them."""
        failure = await self._spoken.warm()  # (never fails a prewarm: the first text imports what it needs)
        if failure is not None:
            self._logger.warning("text normalizer warm-up failed: %s", failure)

    def _open_turn_kwargs(self) -> dict[str, Any]:
        """Per-turn overrides passed to ``open_turn`` (none by default; options live in the provider)."""
        return {}
