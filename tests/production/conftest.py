"""The production-shape tests (docs/production.md): their helpers are importable as ``prod_helpers``.

``emulator_port``: an emulator serving from a thread of its own (its own loop), for tests that run their
client side on loops they make themselves (no loop at construction, two loops in two threads, a loop in
debug mode whose every callback is the client's); ``tls_emulator_port``: the same over TLS with a test CA
(``test_ca`` writes its certificate for ``SSL_CERT_FILE``)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme
from prod_helpers import server_context

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig


@contextlib.contextmanager
def emulator_in_thread(ssl_context: ssl.SSLContext | None = None) -> Iterator[Emulator]:
    started = threading.Event()
    box: dict[str, object] = {}

    def serve() -> None:
        async def main() -> None:
            stop = asyncio.Event()
            box["loop"], box["stop"] = asyncio.get_running_loop(), stop
            async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID), ssl_context=ssl_context) as emu:
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


@pytest.fixture(scope="session")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> Path:
    """The test CA's certificate in a file of its own (a fresh trust configuration for each test)."""
    path = tmp_path / "test-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture
def emulator_port() -> Iterator[Emulator]:
    with emulator_in_thread() as emu:
        yield emu


@pytest.fixture
def tls_emulator_port(ca: trustme.CA) -> Iterator[Emulator]:
    with emulator_in_thread(server_context(ca)) as emu:
        yield emu
