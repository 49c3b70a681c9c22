"""What both framework adapters do with their normalizer, written once: a turn's stream for the provider's
current voice and language, a whole known text's spoken form, and the warm-up at start (docs/text.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from ttsbridge.text.spans import Normalized
from ttsbridge.text.stream import StreamNormalizer

if TYPE_CHECKING:
    from ttsbridge._options import ProviderOptions
    from ttsbridge.text.normalizer import TextNormalizer

__all__ = ["SpokenForm"]


class SpokenForm:
    """An adapter's spoken form: ``normalizer`` (None: off, every text passes as written) over the options
    ``options()`` returns now (the voice picks the lexicon's entries, the language the rules)."""

    __slots__ = ("normalizer", "options")

    def __init__(self, normalizer: TextNormalizer | None, options: Callable[[], ProviderOptions]) -> None:
        self.normalizer = normalizer
        self.options = options

    def stream(self) -> StreamNormalizer:
        """A new turn's normalizer (off: a pass-through)."""
        if self.normalizer is None:
            return StreamNormalizer(None)
        options = self.options()
        return self.normalizer.stream(voice=options.voice, language=getattr(options, "language", None))

    def whole(self, text: str) -> Normalized:
        """A whole known text in its spoken form, with the map."""
        stream = self.stream()
        return stream.push(text) + stream.flush()

    async def warm(self) -> str | None:
        """Import the rules now (at start), not on the first sentence that needs them, in a worker thread (the
        libraries' imports take 100-200 ms: never on the event loop); what failed, or None (a warm-up never
        fails a start: the first text then imports what it needs)."""
        if self.normalizer is None:
            return None
        language = getattr(self.options(), "language", None)
        try:
            await asyncio.to_thread(self.normalizer.warm, language)
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None
