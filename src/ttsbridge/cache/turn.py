"""The two turns of the phrase cache, both plain :class:`~ttsbridge.turns.Turn`\\ s, so the adapters run their
usual path (frames, resampling done, word timing, barge-in, metrics) without knowing where audio came from:

* :class:`CachedTurn` (a hit): serves a stored utterance; sends nothing anywhere, bills nothing.
* :class:`RecordingTurn` (a miss): the provider's live turn, unchanged, whose audio is kept (a decorator
  around it) and handed to the cache once the turn completed cleanly (done, never cancelled, no error, its whole iteration read, and the
  text sent was the text the entry is keyed on).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ttsbridge.cache.entry import PhraseEntry
from ttsbridge.cache.keys import normalise_text
from ttsbridge.policy.usage import TurnEnd, TurnUsage
from ttsbridge.turns import Turn, TurnOutcome

__all__ = ["CachedTurn", "RecordingTurn"]


class CachedTurn(Turn):
    """A stored utterance served as a turn. Its audio is released by the first ``send()`` or ``end()`` (the
    adapters time its words from the text they send, as for a live turn) and yielded in chunks of
    :attr:`chunk_s`, handing the loop back between chunks as live audio does; ``take_ready`` offers the rest at
    once (it has all arrived). ``cancel()``: nothing more is yielded. Bills nothing (``usage``:
    ``characters_billed == 0``, the text in ``characters_cached``)."""

    #: :data:`ttsbridge.tracing` reports it (``ttsbridge.cache``)
    cache = "hit"
    #: seconds of audio per chunk the iterator yields
    chunk_s = 0.04

    def __init__(self, entry: PhraseEntry, *, sample_rate: int, provider: str = "") -> None:
        if entry.sample_rate != sample_rate:
            raise ValueError(f"entry at {entry.sample_rate} Hz served at {sample_rate} Hz")
        self._id = f"phrase-{uuid.uuid4().hex[:16]}"
        self.sample_rate = sample_rate
        self.provider = provider or entry.provider
        self._entry = entry
        self._pos = 0
        self._released = asyncio.Event()
        self._cancelled = False
        self._finished = False
        self._step = max(2, int(self.chunk_s * sample_rate) * 2)
        self._on_done: list[Callable[[Turn], None]] = []

    @property
    def id(self) -> str:
        return self._id

    def __repr__(self) -> str:
        return f"CachedTurn(id={self.id!r}, rate={self.sample_rate}, seconds={self._entry.duration:.2f})"

    async def send(self, text: str) -> None:
        self._release()  # the text is the entry's: nothing goes anywhere (nor fails, even late)

    async def end(self) -> None:
        self._release()

    async def cancel(self) -> None:
        if not self._finished:
            self._cancelled = True
        self._release()

    def _release(self) -> None:
        self._released.set()
        callbacks, self._on_done = self._on_done, []
        for fn in callbacks:
            fn(self)

    def add_done_callback(self, fn: Callable[[Turn], None]) -> None:
        """All of a stored utterance's audio is there once it is released: ``fn`` is called then."""
        if self._released.is_set():
            fn(self)
        else:
            self._on_done.append(fn)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        if not self._released.is_set():
            await self._released.wait()
        pcm, step = self._entry.pcm, self._step
        while not self._cancelled and self._pos < len(pcm):
            if self._pos:
                await asyncio.sleep(0)  # hand the loop back between chunks (barge-in, other turns)
                if self._cancelled:
                    return
            chunk = bytes(pcm[self._pos : self._pos + step])
            self._pos += len(chunk)
            yield chunk
        if not self._cancelled:
            self._finished = True

    def take_ready(self, max_bytes: int) -> bytes:
        """The audio behind the chunk just yielded, up to ``max_bytes`` (whole samples); ``b""`` before the
        first chunk and once cancelled."""
        if not self._pos or self._cancelled or max_bytes < 2:
            return b""
        n = min(max_bytes - max_bytes % 2, len(self._entry.pcm) - self._pos)
        out = bytes(self._entry.pcm[self._pos : self._pos + n])
        self._pos += n
        return out

    def take_received(self) -> bytes:
        if self._cancelled or self.done:
            return b""
        return self.take_ready(len(self._entry.pcm))

    @property
    def audio_started(self) -> bool:
        return self._pos > 0

    @property
    def done(self) -> bool:
        return self._finished or self._cancelled

    @property
    def outcome(self) -> TurnOutcome | None:
        if self._cancelled:
            return "cancelled"
        return "done" if self._finished else None

    @property
    def wire_format(self) -> str:
        return self._entry.wire_format

    @property
    def usage(self) -> TurnUsage:
        ended = self.outcome
        return TurnUsage(
            provider=self.provider,
            turn_id=self.id,
            characters_heard=self.characters_heard,
            audio_seconds=self._pos / 2 / self.sample_rate,
            ended=None if ended is None else TurnEnd(ended),
            characters_cached=len(self._entry.text),
        )


class RecordingTurn:
    """The provider's live turn, recorded for the cache: a decorator around it (as an HTTP cache wraps a
    response's body, not the response). It changes only what recording needs: the text sent (:meth:`send`),
    a cancel (:meth:`cancel`), and the audio handed out (the iterator and :meth:`take_ready` keep what they
    yield); every other attribute *is* the live turn's (id, facts, usage, word reports, ``take_received``...),
    looked up on it. ``on_complete(pcm)`` is called once the iteration ended cleanly and the text sent equals
    ``segments`` (normalised), with all the PCM handed out. A :class:`~ttsbridge.turns.Turn` (registered as
    one), not a subclass: a subclass would answer the base class' defaults instead of the live turn's facts."""

    cache = "miss"

    def __init__(
        self,
        inner: Turn,
        *,
        segments: Sequence[str],
        on_complete: Callable[[bytes], None],
        max_bytes: int,
    ) -> None:
        self._inner = inner
        self._segments = [normalise_text(s) for s in segments if s.strip()]
        self._sent: list[str] = []
        self._on_complete = on_complete
        self._max_bytes = max_bytes
        self._chunks: list[bytes] = []
        self._bytes = 0
        self._cancelled = False

    def __repr__(self) -> str:
        return f"RecordingTurn({self._inner!r})"

    def __getattr__(self, name: str) -> Any:  # everything recording leaves alone is the live turn's
        if name == "_inner":  # (not set yet: a copy being made)
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def inner(self) -> Turn:
        return self._inner

    def _keep(self, pcm: bytes) -> None:
        if pcm and self._bytes <= self._max_bytes:
            self._chunks.append(pcm)
            self._bytes += len(pcm)

    async def send(self, text: str) -> None:
        await self._inner.send(text)
        if text.strip():
            self._sent.append(normalise_text(text))

    async def cancel(self) -> None:
        self._cancelled = True
        await self._inner.cancel()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        source = self._inner.__aiter__()
        closing = contextlib.aclosing(source) if hasattr(source, "aclose") else contextlib.nullcontext(source)
        async with closing as chunks:  # type: ignore[attr-defined]
            async for pcm in chunks:
                self._keep(pcm)
                yield pcm
        self._completed()

    def _completed(self) -> None:
        inner = self._inner
        clean = (
            not self._cancelled
            and inner.outcome == "done"
            and inner.error is None
            and self._bytes <= self._max_bytes
            and self._sent == self._segments
        )
        if clean and self._bytes:
            self._on_complete(b"".join(self._chunks))
        self._chunks = []

    def add_done_callback(self, fn: Callable[[Turn], None]) -> None:
        self._inner.add_done_callback(lambda _inner: fn(self))

    def take_ready(self, max_bytes: int) -> bytes:
        out = self._inner.take_ready(max_bytes)
        self._keep(out)
        return out


Turn.register(RecordingTurn)
