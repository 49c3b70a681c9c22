"""Pipecat service tests: the emulator fixture (helpers live in pc_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as e:
        yield e
