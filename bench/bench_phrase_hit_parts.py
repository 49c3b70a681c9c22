"""Where a Pipecat memory hit's first audio frame spends its time: the bench's Pipecat case
(``bench_phrase_cache.PipecatCase``: ``TTSSpeakFrame`` in, first ``TTSAudioRawFrame`` out) with time stamps
at each step of the hit's path, against the built-in emulator (the hit sends nothing to it).

    PYTHONPATH=src:bench python bench/bench_phrase_hit_parts.py [--rounds 300]

Prints, per step, p50 / p95 in ms since the ``TTSSpeakFrame`` entered the service (the stamps themselves
add a few microseconds each).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from bench_phrase_cache import RATE, PipecatCase
from pipecat.frames.frames import TTSAudioRawFrame

from ttsbridge.cache import CachedProvider, CachedTurn, PhraseCache
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig

STEPS = {
    "open": "open_phrase entered (Pipecat's TTSSpeakFrame handling before it)",
    "lookup": "lookup entered (after the key)",
    "looked_up": "lookup done",
    "opened": "the CachedTurn returned",
    "sent": "the adapter's send() (its bookkeeping before it)",
    "reader": "the reader task iterates the turn",
    "chunk": "the first chunk",
    "appended": "the first frame appended to the audio context",
    "out": "the first frame out of the service (the probe behind it)",
}


class Stamps:
    def __init__(self) -> None:
        self.at: dict[str, float] = {}

    def mark(self, step: str) -> None:
        self.at.setdefault(step, time.perf_counter())


def instrument(stamps: Stamps, case: PipecatCase) -> None:
    """Wrap the hit's steps (this process only: the bench's objects are patched, nothing is kept)."""
    cache_cls: Any = PhraseCache
    provider_cls: Any = CachedProvider
    open_phrase, lookup = provider_cls.open_phrase, cache_cls.lookup
    send, iterate = CachedTurn.send, CachedTurn._iterate

    async def open_phrase_(self: Any, *a: Any, **k: Any) -> Any:
        stamps.mark("open")
        turn = await open_phrase(self, *a, **k)
        stamps.mark("opened")
        return turn

    async def lookup_(self: Any, key: str) -> Any:
        stamps.mark("lookup")
        entry = await lookup(self, key)
        stamps.mark("looked_up")
        return entry

    async def send_(self: Any, text: str) -> None:
        stamps.mark("sent")
        await send(self, text)

    async def iterate_(self: Any) -> AsyncIterator[bytes]:
        stamps.mark("reader")
        async for chunk in iterate(self):
            stamps.mark("chunk")
            yield chunk

    provider_cls.open_phrase, cache_cls.lookup = open_phrase_, lookup_
    CachedTurn.send, CachedTurn._iterate = send_, iterate_  # type: ignore[method-assign]
    append = case.tts.append_to_audio_context

    async def append_(context_id: str, frame: Any) -> None:
        await append(context_id, frame)
        if isinstance(frame, TTSAudioRawFrame):
            stamps.mark("appended")

    case.tts.append_to_audio_context = append_  # type: ignore[method-assign]


async def main(rounds: int) -> None:
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    stamps = Stamps()
    rows: list[dict[str, float]] = []
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
        case = PipecatCase(emu.base_url, PhraseCache.memory(max_bytes=64 << 20))
        await case.start()  # warms the phrase (at RATE)
        instrument(stamps, case)
        try:
            for n in range(rounds + 30):
                stamps.at.clear()
                total = await case.once()
                t0 = case.stamp.t0
                if n >= 30:  # warm-up left out
                    rows.append({k: 1000 * (v - t0) for k, v in stamps.at.items()} | {"out": 1000 * total})
        finally:
            await case.stop()
    print(f"Pipecat memory hit at {RATE} Hz, {rounds} rounds: ms since the TTSSpeakFrame entered, p50 / p95")
    for step, what in STEPS.items():
        xs = [r[step] for r in rows if step in r]
        p95 = statistics.quantiles(xs, n=20, method="inclusive")[18]
        print(f"  {step:10} {statistics.median(xs):6.3f} {p95:6.3f}  {what}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=300)
    asyncio.run(main(ap.parse_args().rounds))
