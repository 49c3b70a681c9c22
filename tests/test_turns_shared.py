"""The turn interface every provider passes, the same way (see tests/chirp/envs.py)."""

from __future__ import annotations

import asyncio

import pytest

from chirp.envs import RATE, Env, env
from loopback import SilentServer
from ttsbridge.errors import TTSTimeoutError

__all__ = ["env"]

S1 = "Hello there, it is good to hear from you."


async def test_a_turn_speaks_and_is_billed_by_its_rule(env: Env) -> None:
    provider = env.turn_provider()
    try:
        turn = await provider.open_turn(sample_rate=RATE)
        await turn.send(S1)
        await turn.end()
        pcm = b"".join([c async for c in turn])
        assert pcm and turn.outcome == "done" and turn.characters_sent == len(S1)
        assert turn.usage.characters_billed == len(S1)
        assert turn.wire_format.endswith(tuple("0123456789"))  # "<encoding>@<rate>"
    finally:
        await provider.aclose()


async def test_a_handshake_that_never_comes_fails_the_turn_within_its_own_timeout(env: Env) -> None:
    """The server accepts TCP and never answers the upgrade: the turn's own timeout bounds the connect and the
    handshake (not the provider's 10 s ``connect_timeout``, nor a retry after it), for every provider."""
    async with SilentServer() as srv:
        provider = env.turn_provider(srv.url)
        try:

            async def speak() -> None:
                turn = await provider.open_turn(sample_rate=RATE, timeout=0.5)
                await turn.send(S1)
                await turn.end()
                async for _ in turn:
                    pass

            with pytest.raises(TTSTimeoutError):
                await asyncio.wait_for(speak(), 0.5 + 4.0)  # bounded: far below connect_timeout (10 s)
            assert srv.connections >= 1 and all(b"Upgrade: websocket" in r for r in srv.requests)
        finally:
            await provider.aclose()
