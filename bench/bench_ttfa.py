"""Client-side time to first audio over loopback: ttsbridge vs a bare `websockets` client (the floor).

Both talk to the built-in emulator (no added latency, unpaced), one turn at a time, on a warm connection
(the pooled socket is reused across turns, as in a conversation) and cold (a new connection per turn).
The bare client does the minimum: send one generation request, wait for the first frame. Ours opens a turn,
sends the sentence, ends the turn, and waits for the first resampled PCM16 chunk at 24 kHz.

    python bench/bench_ttfa.py [--turns 200]

Prints medians and the ratio ours/floor (1.00 = no overhead over the physical floor).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid

from websockets.asyncio.client import connect

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

TEXT = "Hello there, how can I help you today?"


async def floor_turn(ws) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    await ws.send(
        json.dumps(
            {
                "transcript": TEXT,
                "context_id": str(uuid.uuid4()),
                "continue": False,
                "model_id": "gepard-1.0",
                "voice": {"mode": "id", "id": TONE_VOICE_ID},
                "output_format": {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 22050},
            }
        )
    )
    first = None
    while True:
        msg = json.loads(await ws.recv())
        if first is None and msg.get("type") == "chunk":
            first = time.perf_counter() - t0
        if msg.get("type") in ("done", "error"):
            assert first is not None, msg
            return first


async def ours_turn(provider: NineninesixTurnProvider) -> float:
    t0 = time.perf_counter()
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send(TEXT)
    await turn.end()
    first = None
    async for _pcm in turn:
        if first is None:
            first = time.perf_counter() - t0
    assert first is not None
    return first


async def main(turns: int) -> None:
    async with Emulator(EmulatorConfig(realtime_factor=0.0)) as emu:
        url = f"{emu.ws_url}?api_key={emu.api_key}"
        results: dict[str, list[float]] = {
            "floor warm": [],
            "ours warm": [],
            "floor cold": [],
            "ours cold": [],
        }
        opts = NineninesixOptions(voice=TONE_VOICE_ID)
        async with connect(url) as ws:
            provider = NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts)
            await provider.prewarm(24000)
            for _ in range(5):  # warm-up
                await floor_turn(ws)
                await ours_turn(provider)
            for _ in range(turns):  # interleaved so drift hits both alike
                results["floor warm"].append(await floor_turn(ws))
                results["ours warm"].append(await ours_turn(provider))
            await provider.aclose()
        for _ in range(max(10, turns // 4)):
            t0 = time.perf_counter()
            async with connect(url) as ws:
                await floor_turn(ws)
            results["floor cold"].append(time.perf_counter() - t0)
            provider = NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts)
            t0 = time.perf_counter()
            await ours_turn(provider)
            results["ours cold"].append(time.perf_counter() - t0)
            await provider.aclose()
    med = {k: statistics.median(v) * 1000 for k, v in results.items()}
    print(
        f"time to first audio over loopback, median of {turns} warm turns / {len(results['ours cold'])} cold"
    )
    for k, v in med.items():
        print(f"  {k:12} {v:8.2f} ms")
    print(f"  ratio ours/floor warm: {med['ours warm'] / med['floor warm']:.2f}")
    print(f"  ratio ours/floor cold: {med['ours cold'] / med['floor cold']:.2f}")
    print(f"  a warm pooled turn vs a cold one (ours): {med['ours warm'] / med['ours cold']:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=200)
    asyncio.run(main(ap.parse_args().turns))
