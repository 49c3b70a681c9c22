"""Coalescing: a turn that offers ``take_ready(max_bytes)`` has its already-queued chunks pushed as one frame.

No provider offers ``take_ready`` yet (the turn engine will); :class:`_Buffered` is a real :class:`Turn` over
the emulator's turn that reads it to its end first, so every chunk after the first is already queued when
the service reads it: the adapter's coalescing path runs deterministically.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pc_helpers import S1, audio_frames, audio_of, errors_of, make_tts, run, tone_len, words_of
from pipecat.frames.frames import LLMFullResponseEndFrame, LLMFullResponseStartFrame, LLMTextFrame

from ttsbridge.emulator import Emulator
from ttsbridge.turns import Turn


class _Buffered(Turn):
    def __init__(self, inner: Turn) -> None:
        self._inner = inner
        self.id = inner.id
        self.sample_rate = inner.sample_rate
        self._ready: collections.deque[bytes] = collections.deque()
        self.chunks = 0

    async def send(self, text: str) -> None:
        await self._inner.send(text)

    async def end(self) -> None:
        await self._inner.end()

    async def cancel(self) -> None:
        self._ready.clear()
        await self._inner.cancel()

    @property
    def audio_started(self) -> bool:
        return self._inner.audio_started

    @property
    def done(self) -> bool:
        return self._inner.done

    def take_ready(self, max_bytes: int) -> bytes:
        out = bytearray()
        while self._ready and len(out) + len(self._ready[0]) <= max_bytes:
            out += self._ready.popleft()
        return bytes(out)

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        async for pcm in self._inner:
            self.chunks += 1
            self._ready.append(pcm)
        while self._ready:
            yield self._ready.popleft()


async def test_queued_chunks_go_out_as_frames_of_at_most_100_ms_with_every_word(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    tts = make_tts(emu)
    opened: list[_Buffered] = []
    real_open = tts.provider.open_turn

    async def open_turn(**kwargs: Any) -> Turn:
        opened.append(_Buffered(await real_open(**kwargs)))
        return opened[-1]

    monkeypatch.setattr(tts.provider, "open_turn", open_turn)
    frames = [LLMFullResponseStartFrame(), LLMTextFrame(S1), LLMFullResponseEndFrame()]
    down, up = await run(tts, frames, rate=24000)

    assert not errors_of(up)
    assert len(opened) == 1 and opened[0].chunks > 3
    sizes = [len(f.audio) for f in audio_frames(down)]
    assert max(sizes) <= 0.1 * 24000 * 2  # bounded: 100 ms
    assert len(sizes) < opened[0].chunks  # queued chunks were joined
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)  # nothing lost
    assert " ".join(words_of(down)) == S1  # every word, once, in order
