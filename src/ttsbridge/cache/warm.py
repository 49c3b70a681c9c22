"""Warming the phrase cache ahead of time (:meth:`~ttsbridge.cache.PhraseCache.warm`): each text rendered once
as its surface sends a known text, skipping those already cached."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ttsbridge.cache.store import PhraseStore
from ttsbridge.errors import TTSBridgeError, TTSInvalidOptionError
from ttsbridge.turns import TurnProvider

__all__ = ["Progress", "WarmReport", "warm_phrases"]

logger = logging.getLogger("ttsbridge.cache")


@dataclass
class WarmReport:
    """What :meth:`PhraseCache.warm` did: phrases rendered and stored, already cached, failed."""

    stored: int = 0
    cached: int = 0
    failed: int = 0


#: ``progress(done, total, text, status)`` of :meth:`PhraseCache.warm`; status ``stored|cached|failed``.
Progress = Callable[[int, int, str, str], None]


async def warm_phrases(
    cache: PhraseStore,
    tts: Any,
    texts: Iterable[str],
    *,
    sample_rate: int | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> WarmReport:
    """:meth:`PhraseCache.warm`."""
    provider, rate, split = _surface(tts, sample_rate)
    phrases = [t for t in texts if t.strip()]
    report = WarmReport()
    for n, text in enumerate(phrases, 1):
        segments = split(text)
        key = cache.key_for(provider, text, sample_rate=rate, segments=segments, **overrides)
        if key is None:
            raise TTSInvalidOptionError("tts", type(tts).__name__, "a surface whose provider can be cached")
        status = "cached"
        if await cache.lookup(key) is None:
            try:
                pcm = await _render(provider, text, rate, segments, overrides)
            except TTSBridgeError as exc:
                logger.warning("phrase cache: warming %r failed: %s", text[:40], exc)
                status = "failed"
            else:
                entry = cache._entry(
                    "".join(segments),  # the text as sent: its spoken form (docs/text.md)
                    rate,
                    pcm,
                    provider.provider,
                    provider.describe(sample_rate=rate, **overrides).get("wire_format", ""),
                )
                status = "stored" if await cache.store(key, entry) else "failed"
        setattr(report, status, getattr(report, status) + 1)
        if progress is not None:
            progress(n, len(phrases), text, status)
    return report


async def _render(
    provider: TurnProvider, text: str, rate: int, segments: Sequence[str], overrides: dict[str, Any]
) -> bytes:
    """A live turn of ``text`` sent as ``segments`` (each one as it is), read whole; raises if it did not
    complete."""
    turn = await provider.open_turn(sample_rate=rate, **overrides)
    try:
        for part in segments:
            await turn.send(part)
        await turn.end()
        pcm = b"".join([chunk async for chunk in turn])
    finally:
        if not turn.done:
            await turn.cancel()
    if turn.outcome != "done" or not pcm:
        raise TTSBridgeError(f"phrase cache: the turn for {text[:40]!r} ended {turn.outcome}, nothing stored")
    return pcm


def _surface(tts: Any, sample_rate: int | None) -> tuple[TurnProvider, int, Callable[[str], list[str]]]:
    """(provider, output rate, how a known text is split into sends) of a provider, Pipecat service or LiveKit
    TTS."""
    whole: Callable[[str], list[str]] = lambda text: [text]  # noqa: E731
    if isinstance(tts, TurnProvider):
        provider, rate, split = tts, sample_rate, whole
    elif isinstance(getattr(tts, "turn_provider", None), TurnProvider):  # LiveKit TurnTTS
        provider, rate = tts.turn_provider, sample_rate or tts.sample_rate
        # as the stream sends a known text: each sentence of the plugin's tokenizer, in its spoken form
        split = tts.known_phrase_segments
    elif isinstance(getattr(tts, "provider", None), TurnProvider):  # a Pipecat service
        spoken = tts.spoken_form  # (the text in the spoken form the service sends: docs/text.md)
        provider, rate, split = (
            tts.provider,
            sample_rate or tts.sample_rate or getattr(tts, "_init_sample_rate", None),
            lambda text: [spoken(text)],
        )
    else:
        raise TTSInvalidOptionError(
            "tts",
            type(tts).__name__,
            "a TurnProvider, a ttsbridge Pipecat service or a LiveKit TTS of ttsbridge",
        )
    if isinstance(rate, bool) or not isinstance(rate, int) or rate <= 0:
        raise TTSInvalidOptionError(
            "sample_rate", rate, "the output rate in Hz (the rate the pipeline plays)"
        )
    return provider, rate, split
