"""Client-side time to first audio over loopback: ttsbridge vs a bare `websockets` client (the floor).

Both talk to the built-in emulator, run in its own process (no added latency, unpaced), one turn at a
time, on a warm connection
(the pooled socket is reused across turns, as in a conversation) and cold (a new connection per turn).
The bare client does the minimum: send one generation request, wait for the first frame. Ours opens a turn,
sends the sentence, ends the turn, and waits for the first resampled PCM16 chunk at 24 kHz.

    python bench/bench_ttfa.py [--turns 200]

Prints medians and the ratio ours/floor (1.00 = no overhead over the physical floor).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator

from websockets.asyncio.client import connect

from ttsbridge.emulator import TONE_VOICE_ID
from ttsbridge.emulator.config import DEFAULT_API_KEY
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

TEXT = "Hello there, how can I help you today?"


async def floor_turn(ws, t0: float | None = None) -> float:  # type: ignore[no-untyped-def]
    """Time from ``t0`` (default: now) to the first audio frame; reads the turn to its end."""
    t0 = time.perf_counter() if t0 is None else t0
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


async def ours_turn(provider: NineninesixTurnProvider, t0: float | None = None, rate: int = 24000) -> float:
    """Time from ``t0`` (default: now) to the first PCM chunk; reads the turn to its end."""
    t0 = time.perf_counter() if t0 is None else t0
    turn = await provider.open_turn(sample_rate=rate)
    await turn.send(TEXT)
    await turn.end()
    first = None
    async for _pcm in turn:
        if first is None:
            first = time.perf_counter() - t0
    assert first is not None
    return first


@contextlib.asynccontextmanager
async def emulator_process() -> AsyncIterator[str]:
    """``ttsbridge emulator`` in a child process, so its CPU does not share the client's event loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ttsbridge",
        "emulator",
        "--port",
        "0",
        "--realtime-factor",
        "0",
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        m = re.search(r"(http://\S+)", line)
        assert m, line
        yield m.group(1)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 10)


class _Emu:
    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.api_key = DEFAULT_API_KEY
        self.ws_url = base_url.replace("http", "ws", 1) + "/tts/websocket"


async def main(turns: int) -> None:
    async with emulator_process() as base_url:
        emu = _Emu(base_url)
        url = f"{emu.ws_url}?api_key={emu.api_key}"
        results: dict[str, list[float]] = {
            "floor warm": [],
            "ours warm": [],
            "ours 22050": [],
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
                results["ours 22050"].append(await ours_turn(provider, rate=22050))
            await provider.aclose()
        for _ in range(max(10, turns // 4)):
            t0 = time.perf_counter()  # cold: the handshake is part of the time to first audio
            async with connect(url) as ws:
                results["floor cold"].append(await floor_turn(ws, t0))
            provider = NineninesixTurnProvider(emu.api_key, base_url=emu.base_url, options=opts)
            results["ours cold"].append(await ours_turn(provider, time.perf_counter()))
            await provider.aclose()
    med = {k: statistics.median(v) * 1000 for k, v in results.items()}
    print(
        f"time to first audio over loopback, median of {turns} warm turns / {len(results['ours cold'])} cold"
    )
    for k, v in med.items():
        print(f"  {k:12} {v:8.2f} ms")
    print(f"  ratio ours/floor warm: {med['ours warm'] / med['floor warm']:.2f}")
    print(f"  ratio ours/floor cold: {med['ours cold'] / med['floor cold']:.2f}")
    print(f"  ratio ours/floor warm, no resampling (22050 out): {med['ours 22050'] / med['floor warm']:.2f}")
    print(f"  a warm pooled turn vs a cold one (ours): {med['ours warm'] / med['ours cold']:.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=200)
    asyncio.run(main(ap.parse_args().turns))
