"""Shared fixtures: a running emulator over loopback.

* ``emulator``: an :class:`~ttsbridge.emulator.Emulator` with the tone voice as default and no pacing.
* ``make_emulator``: ``await make_emulator(**EmulatorConfig fields)`` starts another (stopped after the test).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from deprecations import no_deprecated_api  # noqa: F401 - autouse: deprecated framework API fails a test
from otel_support import spans  # noqa: F401 - the OpenTelemetry capture fixture
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig


@pytest.fixture
async def make_emulator() -> AsyncIterator[Callable[..., Awaitable[Emulator]]]:
    async with contextlib.AsyncExitStack() as stack:

        async def _make(**config: Any) -> Emulator:
            config.setdefault("default_voice", TONE_VOICE_ID)
            return await stack.enter_async_context(Emulator(EmulatorConfig(**config)))

        yield _make


@pytest.fixture
async def emulator(make_emulator: Callable[..., Awaitable[Emulator]]) -> Emulator:
    return await make_emulator()
