"""Coalescing: a turn that offers ``take_ready(max_bytes)`` has its already-queued chunks pushed as one frame.

:class:`_Buffered` is a real :class:`Turn` over the emulator's turn that reads it to its end first, so every
chunk after the first is already queued when the service reads it: the adapter's coalescing path runs
deterministically. The Nineninesix turn offers ``take_ready`` itself (the engine's ``TurnStream``): there a
slow consumer (the first frame's append held until the whole turn was received) makes the rest queue up.

A frame joined from queued chunks is at most ``coalesce_audio_s`` (100 ms) while the turn's audio came in step;
once a join found chunks queued (a burst: the turn is ahead of its reader), what queues goes out in frames of
up to ``hold_frame_s`` (500 ms), as after a hold; with ``hold_when_ahead = False`` every frame stays at 100 ms.
"""

from __future__ import annotations

import collections
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pc_helpers import (
    S1,
    S2,
    S3,
    Gate,
    InterruptWhen,
    Probe,
    audio_frames,
    audio_of,
    errors_of,
    make_tts,
    pipeline,
    run,
    tone_len,
    words_of,
)
from pipecat.frames.frames import (
    Frame,
    InterruptionFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
    TTSAudioRawFrame,
    TTSTextFrame,
)

from support import wait_until
from ttsbridge.emulator import Emulator
from ttsbridge.engine.turn import EngineTurn
from ttsbridge.pipecat import NineninesixTTSService
from ttsbridge.turns import Turn


class _Buffered(Turn):
    def __init__(self, inner: Turn) -> None:
        self._inner = inner
        self.sample_rate = inner.sample_rate
        self._ready: collections.deque[bytes] = collections.deque()
        self.chunks = 0

    @property
    def id(self) -> str:  # Turn.id is a read-only property (the inner turn's, read live)
        return self._inner.id

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


def _check_sizes(sizes: list[int], *, holds: bool) -> None:
    """The first frame a join at most (100 ms); then, with holds on, frames of up to ``hold_frame_s``."""
    join = NineninesixTTSService.coalesce_audio_s * 24000 * 2
    assert sizes[0] <= join
    if holds:
        assert join < max(sizes) <= NineninesixTTSService.hold_frame_s * 24000 * 2
    else:
        assert max(sizes) <= join


@pytest.mark.parametrize("holds", [True, False])
async def test_queued_chunks_go_out_as_larger_frames_bounded_with_every_word(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch, holds: bool
) -> None:
    monkeypatch.setattr(NineninesixTTSService, "hold_when_ahead", holds)
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
    _check_sizes(sizes, holds=holds)
    assert len(sizes) < opened[0].chunks  # queued chunks were joined
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)  # nothing lost
    assert " ".join(words_of(down)) == S1  # every word, once, in order


class _SlowConsumer:
    """Wraps the service's real Nineninesix turns: records what each ``take_ready`` call returned (and whether
    the turn was cancelled by then), and holds the first audio frame's append until the whole turn was
    received, so every later chunk is queued when the service reads it. With ``hold_second``, the second
    frame's append waits until the turn was cancelled (a barge-in while coalesced audio is queued)."""

    def __init__(
        self, tts: NineninesixTTSService, monkeypatch: pytest.MonkeyPatch, *, hold_second: bool = False
    ) -> None:
        self.turns: list[EngineTurn] = []
        self.taken: list[tuple[int, bool]] = []  # (bytes returned, the turn was cancelled)
        self.appended = 0
        self._hold_second = hold_second
        self._open, self._append = tts.provider.open_turn, tts.append_to_audio_context
        monkeypatch.setattr(tts.provider, "open_turn", self.open_turn)
        monkeypatch.setattr(tts, "append_to_audio_context", self.append)

    async def open_turn(self, **kwargs: Any) -> EngineTurn:
        turn = await self._open(**kwargs)
        assert isinstance(turn, EngineTurn)
        real = turn.take_ready

        def take_ready(max_bytes: int) -> bytes:
            out = real(max_bytes)
            self.taken.append((len(out), turn.outcome == "cancelled"))
            return out

        turn.take_ready = take_ready  # type: ignore[method-assign]  # what the adapter reads off the turn
        self.turns.append(turn)
        return turn

    async def append(self, context_id: str, frame: Frame) -> None:
        if isinstance(frame, TTSAudioRawFrame):
            self.appended += 1
            turn = self.turns[-1]
            if self.appended == 1:
                ctx = turn
                assert ctx is not None
                await wait_until(lambda: ctx.facts.state.terminal, timeout=10.0)
            elif self.appended == 2 and self._hold_second:
                await wait_until(lambda: turn.outcome == "cancelled", timeout=10.0)
        await self._append(context_id, frame)


@pytest.mark.parametrize("holds", [True, False])
async def test_the_nineninesix_turn_coalesces_queued_chunks_with_every_word(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch, holds: bool
) -> None:
    monkeypatch.setattr(NineninesixTTSService, "hold_when_ahead", holds)
    tts = make_tts(emu)
    slow = _SlowConsumer(tts, monkeypatch)
    frames = [LLMFullResponseStartFrame(), LLMTextFrame(S1), LLMFullResponseEndFrame()]
    down, up = await run(tts, frames, rate=24000)

    assert not errors_of(up)
    assert len(slow.turns) == 1
    assert sum(1 for n, _ in slow.taken if n) >= 2  # coalescing ran on the real turn
    _check_sizes([len(f.audio) for f in audio_frames(down)], holds=holds)
    assert len(audio_of(down)) / 2 / 24000 == pytest.approx(tone_len(S1), abs=0.02)  # nothing lost
    assert " ".join(words_of(down)) == S1  # every word, once, in order


async def test_the_nineninesix_turn_coalesces_nothing_after_a_cancel(
    emu: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    tts = make_tts(emu)
    slow = _SlowConsumer(tts, monkeypatch, hold_second=True)
    gate, probe = Gate(), Probe()
    text = " ".join((S1, S2, S3))
    frames = [LLMFullResponseStartFrame(), LLMTextFrame(text), LLMFullResponseEndFrame()]
    _, up = await run(pipeline(gate, tts, probe), [*frames, InterruptWhen(probe.first_audio)], rate=24000)

    assert gate.fired.is_set()
    assert not errors_of(up)
    (turn,) = slow.turns
    assert turn.outcome == "cancelled"
    assert [n for n, cancelled in slow.taken if n and not cancelled]  # coalesced before the cancel
    assert not [n for n, cancelled in slow.taken if n and cancelled]  # nothing taken once cancelled
    assert turn.take_ready(1 << 20) == b""
    assert slow.appended == 2  # the coalesced frame read before the cancel; nothing was read after it
    seen = probe.frames
    cut = next(i for i, f in enumerate(seen) if isinstance(f, InterruptionFrame))
    assert not [f for f in seen[cut + 1 :] if isinstance(f, (TTSAudioRawFrame, TTSTextFrame))]
    assert max(len(f.audio) for f in audio_frames(seen)) <= 0.1 * 24000 * 2
