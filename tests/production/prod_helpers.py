"""Helpers of the production-shape tests: one turn through a provider or a LiveKit TTS, and the emulator's
server-side socket counts."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.turns import TurnProvider

BOUND = 15.0
TEXT = "Hello there. "


async def one_turn(provider: TurnProvider[Any], text: str = TEXT, *, rate: int = 24000) -> bytes:
    """One whole turn (open, send, end, read), bounded."""

    async def run() -> bytes:
        turn = await provider.open_turn(sample_rate=rate)
        await turn.send(text)
        await turn.end()
        return b"".join([pcm async for pcm in turn])

    return await asyncio.wait_for(run(), BOUND)


async def lk_turn(tts: Any, text: str = TEXT) -> int:
    """One LiveKit ``stream()`` turn; the number of audio frames (bounded)."""
    from livekit.agents import APIConnectOptions

    async def run() -> int:
        async with tts.stream(conn_options=APIConnectOptions(max_retry=0, timeout=5.0)) as stream:
            stream.push_text(text)
            stream.end_input()
            return len([ev async for ev in stream])

    return await asyncio.wait_for(run(), BOUND)


def nns_tts(emu: Emulator, **kw: Any) -> Any:
    from livekit.plugins import nineninesix

    kw.setdefault("voice", TONE_VOICE_ID)
    return nineninesix.TTS(emu.api_key, base_url=emu.base_url, **kw)


def kitta_tts(emu: Emulator, **kw: Any) -> Any:
    from livekit.plugins import kitta

    kw.setdefault("voice", TONE_VOICE_ID)
    return kitta.TTS(emu.api_key_for("kitta"), base_url=emu.base_url, **kw)


def opened(emu: Emulator, api: str) -> int:
    """WebSockets of ``api`` the server accepted so far."""
    return len(emu.stats.sockets(api))


def codes(emu: Emulator, api: str | None = None) -> list[int | None]:
    """How each closed WebSocket of ``api`` ended, as the server saw it (1006: no close frame)."""
    return [r.seen_code for r in emu.stats.sockets(api) if not r.open]


def wait_from_outside(cond: Any, timeout: float = 10.0) -> None:
    """For a test whose emulator serves from another thread: poll ``cond()`` until true (bounded)."""
    import time

    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met in time")
        time.sleep(0.01)


def server_context(ca: Any) -> ssl.SSLContext:
    """A server TLS context with a certificate for 127.0.0.1 and localhost issued by ``ca`` (a trustme CA)."""
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(server)
    return server
