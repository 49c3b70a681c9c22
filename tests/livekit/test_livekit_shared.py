"""The LiveKit TTS over every provider, the same way (see tests/chirp/envs.py)."""

from __future__ import annotations

import asyncio

import pytest
from livekit.agents import APIConnectOptions, APIError, APITimeoutError

from chirp.envs import FAIL, RATE, STALL, Env, env
from loopback import SilentServer
from ttsbridge.livekit import TurnTTS

__all__ = ["env"]

S1 = "Hello there, it is good to hear from you."
S2 = "Your order left the warehouse this morning."
WAIT = 20.0


def livekit_tts(e: Env) -> TurnTTS:
    provider = e.turn_provider()
    return TurnTTS(turn_provider=provider, sample_rate=RATE, model=provider.options.model,
                   provider_name=e.spec.display_name)  # fmt: skip


async def _stream(t: TurnTTS, text: str, opts: APIConnectOptions | None = None) -> bytes:
    async def go() -> bytes:
        async with t.stream(conn_options=opts or APIConnectOptions(max_retry=0)) as stream:
            stream.push_text(text)
            stream.end_input()
            return b"".join([ev.frame.data.tobytes() async for ev in stream])

    bound = WAIT if opts is None else opts.timeout + 3.5
    return await asyncio.wait_for(go(), bound)


async def test_livekit_stream_and_synthesize(env: Env) -> None:
    t = livekit_tts(env)
    try:
        assert await _stream(t, S1)
        async with t.synthesize(S2) as s:
            assert b"".join([ev.frame.data.tobytes() async for ev in s])
    finally:
        await t.aclose()


async def test_livekit_a_failed_turn_raises_an_api_error(env: Env) -> None:
    t = livekit_tts(env)
    try:
        with pytest.raises(APIError):
            await _stream(t, f"{S1} {FAIL[env.name]}")
    finally:
        await t.aclose()


async def test_livekit_connect_options_timeout_is_the_turns_one_deadline(env: Env) -> None:
    """``APIConnectOptions.timeout`` reaches the turn: the provider's protocol times the stall out."""
    t = livekit_tts(env)
    try:
        loop = asyncio.get_running_loop()
        start = loop.time()
        with pytest.raises(APITimeoutError):
            await _stream(t, f"{STALL[env.name]} {S1}", APIConnectOptions(max_retry=0, timeout=0.5))
        assert loop.time() - start < 5.0  # (not the provider's own 15-20 s)
    finally:
        await t.aclose()


async def test_livekit_barge_in_then_the_next_stream_speaks(env: Env) -> None:
    t = livekit_tts(env)
    try:
        async with t.stream(conn_options=APIConnectOptions(max_retry=0)) as stream:
            stream.push_text(" ".join([S1] * 4))
            stream.end_input()
            await asyncio.wait_for(stream.__anext__(), WAIT)  # the first audio: then the user barges in
        assert await _stream(t, S2)
    finally:
        await t.aclose()


async def test_livekit_a_handshake_that_never_comes_is_an_api_timeout_within_the_turns_timeout(
    env: Env,
) -> None:
    """LiveKit's ``test_tts_stream_timeout`` on every provider: TCP accepted, the upgrade never answered."""
    async with SilentServer() as srv:
        provider = env.turn_provider(srv.url)
        t = TurnTTS(turn_provider=provider, sample_rate=RATE, model=provider.options.model,
                    provider_name=env.spec.display_name)  # fmt: skip
        try:
            with pytest.raises(APITimeoutError):
                await _stream(t, S1, APIConnectOptions(max_retry=0, timeout=2.5))  # (bounded: WAIT)
        finally:
            await t.aclose()
