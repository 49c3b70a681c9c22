"""``Turn.usage``: the per-turn usage ledger, against the emulator's own billing counters (both providers).

The emulator bills as the pages say (Nineninesix: ``credits_charged`` / ``credits_refunded``; Kitta:
``units_committed`` / ``units_refunded``); what the ledger says was billed must be what the server kept."""

from __future__ import annotations

import asyncio

import pytest

from test_turn_facts import kitta, nns
from ttsbridge.emulator import Emulator, Fault
from ttsbridge.errors import TTSBridgeError
from ttsbridge.policy.usage import TurnEnd
from ttsbridge.turns import Turn, TurnProvider

ONE = "Hello there, how are you? "
TWO = "The second sentence is here. "
WAIT = 10.0


def billed_by_nns(emu: Emulator) -> int:
    return emu.stats.credits_charged - emu.stats.credits_refunded


async def read_all(turn: Turn) -> bytes:
    async def read() -> bytes:
        return b"".join([pcm async for pcm in turn])

    return await asyncio.wait_for(read(), WAIT)


async def first_audio(turn: Turn) -> bytes:
    """The turn's first chunk (the iterator is left open: the turn goes on)."""
    it = turn.__aiter__()
    return await asyncio.wait_for(it.__anext__(), WAIT)


async def open_and_send(provider: TurnProvider, *texts: str, end: bool = True) -> Turn:
    """A turn at 24 kHz with ``texts`` sent (and ended)."""
    turn = await provider.open_turn(sample_rate=24000)
    for text in texts:
        await turn.send(text)
    if end:
        await turn.end()
    return turn


async def test_nineninesix_done_turn_bills_what_was_sent(emulator: Emulator) -> None:
    emu = emulator
    provider = nns(emu)
    try:
        turn = await open_and_send(provider, ONE, TWO)
        pcm = await read_all(turn)
        usage = turn.usage
        assert usage.ended is TurnEnd.DONE and usage.provider == "nineninesix" and usage.turn_id == turn.id
        assert usage.characters_sent == len(ONE) + len(TWO)
        assert usage.characters_billed == len(ONE.strip()) + len(TWO.strip()) == billed_by_nns(emu)
        assert usage.audio_seconds == pytest.approx(len(pcm) / 2 / 24000, abs=0.01)  # wire audio received
    finally:
        await provider.aclose()


async def test_nineninesix_barge_in_still_bills_everything_sent(emulator: Emulator) -> None:
    emu = emulator
    emu.add_fault(Fault(trigger="second sentence", action="stall"))  # its audio never comes: a barge-in
    provider = nns(emu)
    try:
        turn = await open_and_send(provider, ONE, TWO)
        assert await first_audio(turn)
        turn.note_heard(len("Hello "))
        await turn.cancel()
        await emu.wait_until(lambda: emu.stats.cancels == 1, timeout=WAIT)
        usage = turn.usage
        assert usage.ended is TurnEnd.CANCELLED
        assert usage.characters_billed == len(ONE.strip()) + len(TWO.strip()) == billed_by_nns(emu)
        assert usage.characters_heard == len("Hello ") < usage.characters_billed
        assert emu.stats.credits_refunded == 0
    finally:
        await provider.aclose()


async def test_nineninesix_failed_turn_is_refunded(emulator: Emulator) -> None:
    emu = emulator
    emu.add_fault(Fault(trigger="Hello", action="error", error_code="generation_failed"))
    provider = nns(emu)
    try:
        turn = await open_and_send(provider, ONE)
        with pytest.raises(TTSBridgeError):
            await read_all(turn)
        usage = turn.usage
        assert (usage.ended, usage.error_code) == (TurnEnd.FAILED, "generation_failed")
        assert usage.characters_sent == len(ONE)
        assert usage.characters_billed == 0 == billed_by_nns(emu)
        assert emu.stats.credits_refunded == len(ONE.strip())
    finally:
        await provider.aclose()


async def test_nineninesix_retried_turn_bills_only_the_attempt_that_spoke(emulator: Emulator) -> None:
    emu = emulator
    emu.add_fault(Fault(trigger="Hello", action="error", error_code="concurrent_limit"))
    provider = nns(
        emu,
    )
    try:
        turn = await open_and_send(provider, ONE)
        await read_all(turn)
        usage = turn.usage
        assert (usage.ended, usage.retries) == (TurnEnd.DONE, 1)
        assert usage.characters_billed == len(ONE.strip()) == billed_by_nns(emu)
    finally:
        await provider.aclose()


async def test_kitta_done_turn_bills_every_segment(emulator: Emulator) -> None:
    emu = emulator
    provider = kitta(emu)
    try:
        turn = await open_and_send(provider, ONE, TWO)
        pcm = await read_all(turn)
        usage = turn.usage
        assert usage.ended is TurnEnd.DONE and usage.provider == "kitta"
        assert (
            usage.characters_billed == len(ONE.strip()) + len(TWO.strip()) == emu.stats.kitta_units_committed
        )
        assert usage.audio_seconds == pytest.approx(len(pcm) / 2 / 24000, abs=0.01)  # wire audio received
        assert emu.stats.kitta_units_refunded == 0
    finally:
        await provider.aclose()


async def test_kitta_turn_the_server_finished_bills_its_units_once_when_cancelled_before_the_end_is_read(
    emulator: Emulator,
) -> None:
    """A barge-in after the server's ``finish`` arrived, before the consumer read the end: the turn ends
    cancelled and bills the finished session's units once (they were counted twice)."""
    emu = emulator
    provider = kitta(emu)
    try:
        turn = await open_and_send(provider, ONE)
        await emu.wait_until(lambda: turn.settled, timeout=WAIT)
        assert turn.usage.characters_billed == len(ONE.strip()) == emu.stats.kitta_units_committed
        await turn.cancel()
        usage = turn.usage
        assert usage.characters_billed == len(ONE.strip()) == emu.stats.kitta_units_committed
    finally:
        await provider.aclose()


async def test_kitta_barge_in_refunds_segments_without_audio(emulator: Emulator) -> None:
    emu = emulator
    provider = kitta(emu)
    second = "The second sentence is slow. [[kitta:delay=60]]"  # no audio of it before the barge-in
    try:
        turn = await provider.open_turn(sample_rate=24000)
        await turn.send(ONE)
        await turn.send(second)
        assert await first_audio(turn)
        open_usage = turn.usage
        assert open_usage.ended is None
        assert open_usage.characters_billed == len(ONE.strip())
        assert open_usage.characters_reserved == len(second.strip())
        turn.note_heard(len("Hello "))
        await turn.cancel()
        await emu.wait_until(lambda: emu.stats.kitta_segments_refunded == 1, timeout=WAIT)
        usage = turn.usage
        assert usage.ended is TurnEnd.CANCELLED
        assert usage.characters_billed == len(ONE.strip()) == emu.stats.kitta_units_committed
        assert emu.stats.kitta_units_refunded == len("The second sentence is slow.")
        assert usage.characters_heard == len("Hello ") < usage.characters_billed < usage.characters_sent
    finally:
        await provider.aclose()


async def test_kitta_failed_turn_refunds_its_segment(emulator: Emulator) -> None:
    emu = emulator
    provider = kitta(emu)
    try:
        turn = await provider.open_turn(sample_rate=24000)
        await turn.send("Never heard. [[kitta:error=internal_error]]")
        await turn.end()
        with pytest.raises(TTSBridgeError):
            await read_all(turn)
        await emu.wait_until(lambda: emu.stats.kitta_segments_refunded == 1, timeout=WAIT)
        usage = turn.usage
        assert (usage.ended, usage.error_code) == (TurnEnd.FAILED, "internal_error")
        assert usage.characters_billed == 0 == emu.stats.kitta_units_committed
    finally:
        await provider.aclose()
