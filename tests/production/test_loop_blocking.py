"""Nothing on the turn path blocks the event loop: the turn path (a first ``wss://`` connect with a trust
configuration never used before, a Nineninesix turn resampled 22050 -> 24000, its SSE synthesis, a Kitta
turn, a LiveKit ``stream()``, a phrase-cache miss then hit in SQLite) runs on a loop in asyncio debug mode,
its slow-callback log taken from 1 ms so that the worst callback is always seen and those over the 5 ms bound
(``slow_callback_duration = 0.005``) are counted; the emulator serves from another thread, so every callback of the
loop is the client's. The worst callback is reported (``-s`` prints it; ``record_property``
``worst_callback_ms``; docs/production.md keeps the measured value), not asserted: no timed assertions. What
is asserted: the TLS context is built off the loop (websockets and aiohttp would otherwise build one on it per
connect); the slow callbacks are listed with where they ran."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
from prod_helpers import lk_turn, one_turn

from ttsbridge.cache import CachedProvider, PhraseCache
from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

SLOW = 0.005  # the bound: a callback longer than this blocks the loop
LOG_FROM = 0.001  # debug mode's slow_callback_duration here: below the bound, so the worst is always seen
PHRASE = "Thanks for calling."


class SlowCallbacks(logging.Handler):
    """asyncio's debug-mode "Executing <handle> took N seconds" lines of one thread."""

    def __init__(self, thread: threading.Thread) -> None:
        super().__init__(logging.WARNING)
        self.thread = thread
        self.seen: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread.ident and record.getMessage().startswith("Executing"):
            self.seen.append((float(record.args[1]), str(record.args[0])[:200]))  # type: ignore[index]


async def turn_path(emu: Emulator, cache_dir: Path) -> None:
    from livekit.plugins import nineninesix

    cache = PhraseCache.sqlite(str(cache_dir / "phrases.db"))
    raw = NineninesixTurnProvider(
        emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID)
    )
    nns = CachedProvider(raw, cache)
    kitta = KittaTurnProvider(
        emu.api_key_for("kitta"),
        base_url=emu.base_url,
        options=KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash"),
    )
    lk = nineninesix.TTS(emu.api_key, base_url=emu.base_url, voice=TONE_VOICE_ID)
    try:
        for _ in range(2):
            assert await one_turn(nns)  # 22050 on the wire, 24000 out: the resampler
            assert [pcm async for pcm in raw.synthesize("Hello there.", sample_rate=24000)]
            assert await one_turn(kitta)
            assert await lk_turn(lk) > 0
            phrase = await nns.open_phrase(PHRASE, sample_rate=24000)  # a miss, then a hit
            await phrase.send(PHRASE)
            await phrase.end()
            assert b"".join([pcm async for pcm in phrase])
    finally:
        await lk.aclose()
        await nns.aclose()
        await kitta.aclose()
        await cache.aclose()


def test_the_turn_path_never_blocks_the_loop(
    tls_emulator_port: Emulator,
    ca_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Any,
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))  # a trust configuration no context was built for
    built_on: list[threading.Thread] = []
    create = ssl.create_default_context

    def observed(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        built_on.append(threading.current_thread())
        return create(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", observed)
    slow = SlowCallbacks(threading.current_thread())
    logging.getLogger("asyncio").addHandler(slow)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = LOG_FROM
        await turn_path(tls_emulator_port, tmp_path)

    try:
        asyncio.run(main())
    finally:
        logging.getLogger("asyncio").removeHandler(slow)
    assert built_on, "a TLS context was built for the new trust configuration"
    assert threading.current_thread() not in built_on, "a TLS context was built on the loop"
    worst = max((d for d, _ in slow.seen), default=0.0)
    over = [d for d, _ in slow.seen if d > SLOW]
    record_property("worst_callback_ms", round(worst * 1000, 2))
    record_property("callbacks_over_5ms", len(over))
    print(
        f"\nworst callback on the turn path: {worst * 1000:.1f} ms; over {SLOW * 1000:g} ms: {len(over)}; "
        f"over {LOG_FROM * 1000:g} ms: {len(slow.seen)}"
    )
    for duration, handle in sorted(slow.seen, reverse=True)[:5]:
        print(f"  {duration * 1000:.1f} ms  {handle}")
