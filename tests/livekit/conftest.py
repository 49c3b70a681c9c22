"""LiveKit plugin test fixtures: the emulator, and a leaked-task check like livekit/agents' conftest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ttsbridge.emulator import Emulator


#: server-side tasks (the emulator and aiohttp's request handlers) are not the client's to clean up
_SERVER_CODE = ("/ttsbridge/emulator/", "/aiohttp/web_")


def _ignorable(task: asyncio.Task[object]) -> bool:
    try:
        coro = task.get_coro()
        name = getattr(coro, "__qualname__", "") or type(coro).__name__
        if "async_generator_athrow" in name:
            return True
        code = getattr(coro, "cr_code", None)
        files = [code.co_filename] if code is not None else []
        files += [frame.f_code.co_filename for frame in task.get_stack()]
        if any("pytest" in f for f in files):
            return True
        if any(marker in f for f in files for marker in _SERVER_CODE):
            return True
    except Exception:
        pass
    return False


@pytest.fixture(autouse=True)
async def fail_on_leaked_tasks() -> AsyncIterator[None]:
    """Every task a test starts (streams, emitters, tokenizers, provider readers) is gone when it ends."""
    before = set(asyncio.all_tasks())
    yield
    # let tasks whose cancellation was already requested finish unwinding (bounded)
    for _ in range(5):
        await asyncio.sleep(0)
    leaked = [t for t in set(asyncio.all_tasks()) - before if not t.done() and not _ignorable(t)]
    if leaked:
        pytest.fail("test leaked tasks:\n" + "\n".join(repr(t) for t in leaked))


@pytest.fixture
async def emu() -> AsyncIterator[Emulator]:
    from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig

    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID)) as e:
        yield e
