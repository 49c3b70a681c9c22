"""One streaming turn with the framework-free Nineninesix provider, against the built-in emulator.

python examples/nineninesix_turn.py            # offline, writes turn.wav
NINENINESIX_API_KEY=sk_996_... python examples/nineninesix_turn.py --real --voice <id>
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import AsyncIterator

from ttsbridge.audio.wav import write_wav
from ttsbridge.emulator import Emulator
from ttsbridge.nineninesix import DEFAULT_BASE_URL, NineninesixOptions, NineninesixTurnProvider

SENTENCES = ["Hello there.", "Thanks for calling.", "How can I help you today?"]


@contextlib.asynccontextmanager
async def target(real: bool) -> AsyncIterator[tuple[str, str | None]]:
    if real:
        yield DEFAULT_BASE_URL, None  # key from $NINENINESIX_API_KEY
        return
    async with Emulator() as emu:
        yield emu.base_url, emu.api_key


async def main(real: bool, voice: str | None, rate: int, out: str) -> None:
    async with target(real) as (base_url, key):
        provider = NineninesixTurnProvider(key, base_url=base_url, options=NineninesixOptions(voice=voice))
        try:
            turn = await provider.open_turn(sample_rate=rate)
            for s in SENTENCES:  # as an LLM would release them
                await turn.send(s + " ")
            await turn.end()
            pcm = b"".join([chunk async for chunk in turn])
        finally:
            await provider.aclose()
    write_wav(out, pcm, rate)
    print(f"{out}: {len(pcm) / 2 / rate:.2f} s at {rate} Hz")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true", help="use the real API ($NINENINESIX_API_KEY)")
    ap.add_argument("--voice")
    ap.add_argument("--rate", type=int, default=24000)
    ap.add_argument("--out", default="turn.wav")
    a = ap.parse_args()
    asyncio.run(main(a.real, a.voice, a.rate, a.out))
