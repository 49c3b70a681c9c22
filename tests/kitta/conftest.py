"""Kitta test fixtures: an emulator over loopback, client/provider factories, and a leaked-task check."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.emulator.kitta import KittaConfig
from ttsbridge.kitta import KittaOptions, KittaTurnProvider


def client_tasks() -> list[asyncio.Task[Any]]:
    """Live tasks started by the Kitta client side: our named tasks and websockets' connection tasks."""
    out = []
    for task in asyncio.all_tasks():
        if task.done() or task is asyncio.current_task():
            continue
        name = task.get_name()
        if name.startswith("kitta-") and not name.startswith("kitta-emulator-"):
            out.append(task)
            continue
        coro = task.get_coro()
        code = getattr(coro, "cr_code", None)
        if code is not None and "/websockets/" in code.co_filename:
            out.append(task)
    return out


@pytest.fixture(autouse=True)
async def no_leaked_client_tasks() -> AsyncIterator[None]:
    yield
    for _ in range(5):  # let already-cancelled tasks unwind
        await asyncio.sleep(0)
    leaked = client_tasks()
    if leaked:
        pytest.fail("test leaked client tasks:\n" + "\n".join(repr(t) for t in leaked))


@pytest.fixture
async def kemu(make_emulator: Callable[..., Awaitable[Emulator]]) -> Emulator:
    """An emulator with a Kitta config suited to tests (no pacing, short auth timeout)."""
    return await make_emulator(kitta=KittaConfig(auth_timeout_s=2.0))


@pytest.fixture
def kitta_key(kemu: Emulator) -> str:
    return kemu.config.kitta.a_valid_key()


@pytest.fixture
def kitta_url(kemu: Emulator) -> str:
    return f"ws://{kemu.config.host}:{kemu.port}/v2/tts/live"


@pytest.fixture
def tone_options() -> KittaOptions:
    return KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash")


@contextlib.asynccontextmanager
async def _factory(
    cls: type[Any], kemu: Emulator, kitta_key: str, tone_options: KittaOptions
) -> AsyncIterator[Callable[..., Any]]:
    """Build ``cls`` (a provider) against the emulator with fast retries; close them all after."""
    made: list[Any] = []

    def _make(**kwargs: Any) -> Any:
        kwargs.setdefault("base_url", kemu.base_url)
        kwargs.setdefault("options", tone_options)
        kwargs.setdefault("backoff_initial", 0.01)
        kwargs.setdefault("backoff_max", 0.05)
        kwargs.setdefault("event_timeout", 5.0)
        obj = cls(kwargs.pop("api_key", kitta_key), **kwargs)
        made.append(obj)
        return obj

    yield _make
    for obj in made:
        with contextlib.suppress(Exception):
            await obj.aclose()


@pytest.fixture
async def make_provider(
    kemu: Emulator, kitta_key: str, tone_options: KittaOptions
) -> AsyncIterator[Callable[..., KittaTurnProvider]]:
    async with _factory(KittaTurnProvider, kemu, kitta_key, tone_options) as make:
        yield make
