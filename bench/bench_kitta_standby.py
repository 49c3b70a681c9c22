"""Kitta time to first audio: a pre-connected standby connection vs a fresh connection per turn.

A Kitta v2 connection carries one generation, so without a standby every turn pays the WebSocket handshake,
``authenticated``, ``start`` -> ``ready`` before its first text can go out. With ``standby=True`` the provider
keeps one connection connected and authenticated in the background, with ``start`` held: the turn sends its
``start`` (its own request_id) on it, so only ``start`` -> ``ready`` stays on its path. Both runs use the same
emulator delays; the bench also checks that each turn started exactly one server session (none while idle).

The emulator adds a realistic ``first_chunk_latency`` (model time to first audio) and a handshake delay
(TCP + TLS + load balancer + upgrade on a real network), both knobs below. Turns are a few hundred ms apart,
as in a conversation, so the replacement standby is ready when the next turn starts (``prewarm()`` between
turns, outside the timed region, waits for it). Audio is paced (real time by default) and each turn is
cancelled once its first chunk arrived.

    python bench/bench_kitta_standby.py [--turns 30] [--first-chunk 0.15] [--handshake 0.12]
                                        [--realtime-factor 1.0]

Prints the medians, p90s, the ratio fresh/standby, and the server sessions started per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig
from ttsbridge.emulator.kitta import KittaConfig
from ttsbridge.kitta import KittaOptions, KittaTurnProvider

TEXT = "Hello there, how can I help you today? "


async def one_turn(provider: KittaTurnProvider) -> tuple[float, bool]:
    t0 = time.perf_counter()
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send(TEXT)
    await turn.end()
    first: float | None = None
    async for _pcm in turn:
        first = time.perf_counter() - t0
        break
    await turn.cancel()  # the rest of the (paced) audio is not what we measure
    assert first is not None, "no audio"
    return first, turn.connection_reused


async def run(provider: KittaTurnProvider, turns: int, standby: bool) -> list[float]:
    times: list[float] = []
    if standby:
        await provider.prewarm()
    for _ in range(turns):
        ttfa, used = await one_turn(provider)
        assert used == standby, "standby not used" if standby else "unexpected standby"
        times.append(ttfa)
        if standby:
            await provider.prewarm()  # the gap between turns: the replacement gets ready
    return times


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1] if len(xs) >= 10 else max(xs)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--first-chunk", type=float, default=0.15, help="emulator first_chunk_latency (s)")
    ap.add_argument("--handshake", type=float, default=0.12, help="emulator handshake delay (s)")
    ap.add_argument("--realtime-factor", type=float, default=1.0, help="emulator audio pacing (0 = none)")
    args = ap.parse_args()

    kcfg = KittaConfig(
        first_chunk_latency_s=args.first_chunk,
        handshake_delay_s=args.handshake,
        realtime_factor=args.realtime_factor,
    )
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID, kitta=kcfg)) as emu:
        options = KittaOptions(voice_id=TONE_VOICE_ID)
        key = emu.config.kitta.a_valid_key()
        fresh = KittaTurnProvider(key, base_url=emu.base_url, options=options, standby=False)
        warm = KittaTurnProvider(
            key, base_url=emu.base_url, options=options, standby=True, standby_max_age=60
        )
        try:
            await run(fresh, 2, False)  # warm-up (imports, first connections)
            await run(warm, 2, True)
            before = emu.stats.kitta_sessions
            t_fresh = await run(fresh, args.turns, False)
            mid = emu.stats.kitta_sessions
            t_warm = await run(warm, args.turns, True)
            per_turn = ((mid - before) / args.turns, (emu.stats.kitta_sessions - mid) / args.turns)
        finally:
            await fresh.aclose()
            await warm.aclose()

    m_fresh, m_warm = statistics.median(t_fresh), statistics.median(t_warm)
    print(
        f"Kitta TTFA over loopback, {args.turns} turns each; emulator first_chunk_latency="
        f"{args.first_chunk * 1000:.0f} ms, handshake delay={args.handshake * 1000:.0f} ms, "
        f"realtime_factor={args.realtime_factor:g}"
    )
    print(f"  fresh session per turn : median {m_fresh * 1000:7.1f} ms   p90 {p90(t_fresh) * 1000:7.1f} ms")
    print(f"  pre-connected standby  : median {m_warm * 1000:7.1f} ms   p90 {p90(t_warm) * 1000:7.1f} ms")
    saved = 1000 * (m_fresh - m_warm)
    print(f"  ratio fresh/standby    : {m_fresh / m_warm:.2f}x   (saved {saved:.1f} ms/turn)")
    print(f"  sessions started/turn  : fresh {per_turn[0]:.2f}, standby {per_turn[1]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
