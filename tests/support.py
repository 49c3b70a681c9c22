"""Test support shared by every test folder (``tests/`` is on ``sys.path`` through its conftest)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable


async def wait_until(cond: Callable[[], bool], timeout: float = 5.0, *, interval: float = 0.005) -> None:
    """Wait until ``cond()`` is true, polling; ``TimeoutError`` after ``timeout`` seconds.

    For client-side state that has no event to wait on (pool bookkeeping, idle clocks). For the emulator's
    counters prefer ``emu.wait_until``, which wakes on every change instead of polling.
    """

    async def poll() -> None:
        while not cond():  # noqa: ASYNC110 - a bounded poll of state that has no event
            await asyncio.sleep(interval)

    await asyncio.wait_for(poll(), timeout)


def free_port() -> int:
    """A TCP port on loopback that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
