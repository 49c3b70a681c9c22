"""The production-shape tests (docs/production.md): their helpers are importable as ``prod_helpers``.

``emulator_port``: an emulator serving from a thread of its own (its own loop), for tests that run their
client side on loops they make themselves (no loop at construction, two loops in two threads)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig


@pytest.fixture
def emulator_port() -> Iterator[Emulator]:
    started = threading.Event()
    box: dict[str, object] = {}

    def serve() -> None:
        async def main() -> None:
            stop = asyncio.Event()
            box["loop"], box["stop"] = asyncio.get_running_loop(), stop
            async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as emu:
                box["emu"] = emu
                started.set()
                await stop.wait()

        asyncio.run(main())

    thread = threading.Thread(target=serve, name="emulator", daemon=True)
    thread.start()
    assert started.wait(10), "the emulator did not start"
    emu = box["emu"]
    assert isinstance(emu, Emulator)
    try:
        yield emu
    finally:
        loop = box["loop"]
        assert isinstance(loop, asyncio.AbstractEventLoop)
        loop.call_soon_threadsafe(box["stop"].set)  # type: ignore[attr-defined]
        thread.join(10)
