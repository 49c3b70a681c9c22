"""What the voice normalizer (ttsbridge.text) costs: CPU per character, the first text of a process, and the
time to first audio it adds.

1. CPU per character (``time.process_time``), each corpus normalized piece by piece as the adapters send it
   (a StreamNormalizer over its sentences): plain text (the fast path: no rule runs), a mixed reply with
   every class (numbers, money, phones, emails, URLs, dates, times, units, ranges, acronyms, markdown,
   emoji, quotes), the same in Spanish, a markdown-heavy reply; against the cost of ``len(text)`` nothing.
2. The first text of a fresh process (a child per measure): importing ``ttsbridge.text`` (what the adapters
   import), the first sentence with nothing warmed (the rules and their libraries are imported then), the
   first sentence after ``TextNormalizer.warm()`` (what the adapters call at start / prewarm), and
   ``warm()`` itself.
3. Time to first audio over loopback (the emulator in a child process, unpaced, a warm pooled socket), one
   turn at a time as an adapter opens it: normalizer on (the first sentence normalized, then sent) against
   off, interleaved; and the first sentence's hold (always none for a sentence: it never waits).

    python bench/bench_text.py [--turns 200] [--repeat 200]

Prints medians (and the TTFA difference with its p95 spread).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_ttfa import _Emu, emulator_process

from ttsbridge.emulator import TONE_VOICE_ID
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.text import Lexicon, TextNormalizer, split_sentences
from ttsbridge.text.stream import StreamNormalizer

PLAIN = (
    "Sure, I can help you with that. Your order left the warehouse this morning and should arrive soon. "
    "Is there anything else you would like to know about it? I am happy to help with anything else."
)
MIXED = (
    "Your total is $1,234.50, due by 12/05; call +1 (415) 555-0134 or email help@acme.io. "
    "The **API** limit is 45% higher, about 5 km or 3.5 GB, since 2019–2024. "
    "Meet me at 3:30 pm on May 5th, 2025 at www.example.com/docs. It’s the “best” 🎉 deal: USD 12 or €20."
)
SPANISH = (
    "Su total es 1.234,50 €, antes del 12/05; llame al 612 34 56 78 o escriba a ayuda@acme.es. "
    "La API sube un 45 %, unos 5 km o 3,5 GB. Nos vemos a las 15:30 del 5 de mayo de 2025. ¡Es “genial”! 🎉"
)
MARKDOWN = (
    "# Your options\n\n- **Basic**: $5 a month\n- **Pro**: $20 a month, with `priority` support\n\n"
    "See [the pricing page](https://acme.io/pricing) for *details*. > Note: prices exclude tax.\n"
)
FIRST = "Sure, your total is $42.50, and I can send the receipt to help@acme.io."


def cpu_per_char(norm: TextNormalizer, text: str, repeat: int) -> float:
    """CPU microseconds per character, the text normalized sentence by sentence through a stream."""
    pieces = [s + " " for s in split_sentences(text)]
    chars = sum(len(p) for p in pieces)
    for _ in range(5):  # warm-up (imports, regex caches)
        s = norm.stream()
        for p in pieces:
            s.push(p, whole=True)
    t0 = time.process_time()
    for _ in range(repeat):
        s = norm.stream()
        for p in pieces:
            s.push(p, whole=True)
        s.flush()
    return (time.process_time() - t0) / (repeat * chars) * 1e6


_CHILD = """
import json, sys, time
import ttsbridge  # (the package itself: the adapters import it anyway)
t0 = time.perf_counter()
import ttsbridge.text as T
from ttsbridge.text.spans import Normalized
from ttsbridge.text.stream import StreamNormalizer
imported = time.perf_counter() - t0
n = T.TextNormalizer()
warmed = 0.0
if sys.argv[1] == "warm":
    t0 = time.perf_counter(); n.warm(); warmed = time.perf_counter() - t0
t0 = time.perf_counter()
out = n.stream().push(sys.argv[2], whole=True)
first = time.perf_counter() - t0
print(json.dumps({"import": imported, "warm": warmed, "first": first, "spoken": out.spoken}))
"""


def first_text(mode: str, runs: int) -> dict[str, float]:
    """Medians (s) of a fresh process: import, warm() (mode "warm"), its first sentence."""
    got: dict[str, list[float]] = {"import": [], "warm": [], "first": []}
    # bytecode cached as an installed package has it (a first run writes it; PYTHONDONTWRITEBYTECODE would
    # make every child compile the sources)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    for n in range(runs + 1):
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, mode, FIRST], capture_output=True, text=True, check=True, env=env
        ).stdout
        if n == 0:
            continue
        data = json.loads(out)
        for k in got:
            got[k].append(data[k])
    return {k: statistics.median(v) for k, v in got.items()}


async def ttfa(
    provider: NineninesixTurnProvider, stream: StreamNormalizer, text: str = FIRST + " "
) -> tuple[float, float]:
    """(time to first audio, of which normalizing the first sentence) of one turn opened as the adapters do."""
    t0 = time.perf_counter()
    piece = stream.push(text, whole=True)
    normalized = time.perf_counter() - t0
    assert stream.held == ""  # the first sentence never waits
    turn = await provider.open_turn(sample_rate=24000)
    await turn.send(piece.sendable)
    await turn.end()
    first = None
    async for _pcm in turn:
        if first is None:
            first = time.perf_counter() - t0
    assert first is not None
    return first, normalized


async def ttfa_ab(turns: int) -> dict[str, list[float]]:
    norm = TextNormalizer()
    norm.warm()
    results: dict[str, list[float]] = {"off": [], "on": [], "spoken": [], "normalize": []}
    spoken = norm.normalize(FIRST + " ").spoken  # (the same text, sent already spoken: the server's share)
    async with emulator_process() as base_url:
        emu = _Emu(base_url)
        provider = NineninesixTurnProvider(
            emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID)
        )
        await provider.prewarm(24000)
        for _ in range(5):
            await ttfa(provider, norm.stream())
        for _ in range(turns):  # interleaved so drift hits both alike
            off, _ = await ttfa(provider, StreamNormalizer(None))
            on, spent = await ttfa(provider, norm.stream())
            pre, _ = await ttfa(provider, StreamNormalizer(None), spoken)
            results["off"].append(off)
            results["on"].append(on)
            results["spoken"].append(pre)
            results["normalize"].append(spent)
        await provider.aclose()
    return results


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


def main(turns: int, repeat: int) -> None:
    en = TextNormalizer(lexicon=Lexicon({"Acme": "ack me"}))
    es = TextNormalizer(language="es")
    print("1. CPU per character (process time, sentence by sentence through a stream)")
    for name, norm, text in (
        ("plain (fast path)", en, PLAIN),
        ("mixed, every class", en, MIXED),
        ("Spanish, mixed", es, SPANISH),
        ("markdown-heavy", en, MARKDOWN),
    ):
        print(f"  {name:22} {cpu_per_char(norm, text, repeat):7.2f} us/char")
    print("2. the first text of a fresh process (median of 7)")
    cold, warm = first_text("cold", 7), first_text("warm", 7)
    print(f"  import ttsbridge.text (adapters) {cold['import'] * 1000:5.2f} ms  (after ttsbridge itself)")
    print(
        f"  first sentence, nothing warmed {cold['first'] * 1000:7.2f} ms  (imports the rules and libraries)"
    )
    print(f"  TextNormalizer.warm()          {warm['warm'] * 1000:7.2f} ms  (at service start / prewarm)")
    print(f"  first sentence after warm()    {warm['first'] * 1000:7.2f} ms")
    print(
        f"3. time to first audio over loopback, {turns} turns each, interleaved (warm socket, warmed normalizer)"
    )
    r = asyncio.run(ttfa_ab(turns))
    off, on, pre = (statistics.median(r[k]) * 1000 for k in ("off", "on", "spoken"))
    diffs = [(a - b) * 1000 for a, b in zip(r["on"], r["spoken"], strict=True)]
    print(f"  off (the LLM's text as written)         {off:7.3f} ms")
    print(f"  on  (normalized, then sent)             {on:7.3f} ms")
    print(f"  the spoken text sent as is (no work)    {pre:7.3f} ms  (a longer text: the server's share)")
    print(f"  added by normalizing (on - as is, median of pairs) {statistics.median(diffs):+.3f} ms")
    print(
        f"  normalizing the first sentence: median {statistics.median(r['normalize']) * 1e6:.0f} us, p95 {p95(r['normalize']) * 1e6:.0f} us"
    )
    print("  the first sentence held back: never (asserted on every turn)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    main(args.turns, args.repeat)
