"""The turn facts tracing reads (turns.py): retries, outcome + error code, wire format; both providers,
against the emulator."""

from __future__ import annotations

import asyncio

import pytest

from ttsbridge.emulator import TONE_VOICE_ID, Emulator, Fault
from ttsbridge.errors import TTSAPIError, TTSBridgeError, TTSConnectionError, TTSTimeoutError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider
from ttsbridge.turns import Turn, error_code

TEXT = "Hello there, how are you?"


async def speak(turn: Turn, text: str = TEXT) -> bytes:
    await turn.send(text)
    await turn.end()

    async def read() -> bytes:
        return b"".join([pcm async for pcm in turn])

    return await asyncio.wait_for(read(), 10.0)


def nns(emu: Emulator, **options: object) -> NineninesixTurnProvider:
    return NineninesixTurnProvider(
        emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID, **options)
    )


def kitta(emu: Emulator) -> KittaTurnProvider:
    return KittaTurnProvider(
        emu.config.kitta.a_valid_key(), base_url=emu.base_url, options=KittaOptions(voice_id=TONE_VOICE_ID)
    )


async def test_nineninesix_done_turn_stays_done_when_cancelled_later(emulator: Emulator) -> None:
    emu = emulator
    """Adapters cancel in ``finally``: a turn that completed must still say ``done`` afterwards."""
    provider = nns(emu, encoding="pcm_mulaw", sample_rate=8000)
    try:
        turn = await provider.open_turn(sample_rate=16000)
        assert turn.outcome is None
        assert await speak(turn)
        assert (turn.outcome, turn.error_code, turn.retries) == ("done", None, 0)
        await turn.cancel()
        assert turn.outcome == "done"
        assert turn.wire_format == "pcm_mulaw@8000"
        assert provider.describe(sample_rate=16000) == {
            "model": provider.options.model,
            "voice": TONE_VOICE_ID,
            "wire_format": "pcm_mulaw@8000",
        }
    finally:
        await provider.aclose()


async def test_nineninesix_retried_then_failed_and_cancelled_turns(emulator: Emulator) -> None:
    emu = emulator
    emu.add_fault(Fault(trigger="Hello", action="error", error_code="concurrent_limit"))
    provider = nns(emu)
    try:
        retried = await provider.open_turn(sample_rate=24000)
        assert await speak(retried)
        assert (retried.outcome, retried.retries) == ("done", 1)

        emu.add_fault(Fault(trigger="Hello", action="error", error_code="generation_failed"))
        failed = await provider.open_turn(sample_rate=24000)
        with pytest.raises(TTSAPIError):
            await speak(failed)
        assert (failed.outcome, failed.error_code) == ("failed", "generation_failed")

        cancelled = await provider.open_turn(sample_rate=24000)
        await cancelled.send(TEXT)
        await cancelled.cancel()
        assert (cancelled.outcome, cancelled.error_code) == ("cancelled", None)
    finally:
        await provider.aclose()


async def test_kitta_turn_facts(emulator: Emulator) -> None:
    emu = emulator
    provider = kitta(emu)
    try:
        turn = await provider.open_turn(sample_rate=24000)
        assert turn.outcome is None
        assert await speak(turn)
        assert (turn.outcome, turn.retries, turn.error_code) == ("done", 0, None)
        assert turn.wire_format == f"pcm@{turn.protocol.sample_rate}"
        assert provider.describe(sample_rate=24000)["voice"] == TONE_VOICE_ID

        cancelled = await provider.open_turn(sample_rate=24000)
        await cancelled.send(TEXT)
        await cancelled.cancel()
        assert cancelled.outcome == "cancelled"
    finally:
        await provider.aclose()


def test_error_code_names_the_server_code_or_the_kind_of_failure() -> None:
    api = TTSAPIError("m", provider="kitta", error_code="quota_exceeded", status_code=402)
    assert error_code(api) == "quota_exceeded"
    assert error_code(TTSTimeoutError("t")) == "timeout"
    assert error_code(asyncio.TimeoutError()) == "timeout"
    assert error_code(TTSConnectionError("c")) == "connection_error"
    assert error_code(TTSBridgeError("x")) == "TTSBridgeError"
