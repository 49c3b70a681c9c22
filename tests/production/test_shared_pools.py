"""One socket per endpoint, key and settings per event loop, however many instances (docs/production.md).

Every count is the server's own (the emulator's connection log), never the client's."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest
from prod_helpers import codes, kitta_tts, lk_turn, nns_tts, one_turn, opened, wait_from_outside

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.engine.shared import close_loop, shared_count
from ttsbridge.errors import TTSConnectionError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider

NNS = "nineninesix"
KITTA = "kitta"


def nns(emu: Emulator, **kw: Any) -> NineninesixTurnProvider:
    return NineninesixTurnProvider(
        emu.api_key, base_url=emu.base_url, options=NineninesixOptions(voice=TONE_VOICE_ID), **kw
    )


def kitta(emu: Emulator, **kw: Any) -> KittaTurnProvider:
    options = KittaOptions(voice_id=TONE_VOICE_ID, model="fishaudio-s21pro-flash")
    return KittaTurnProvider(emu.api_key_for(KITTA), base_url=emu.base_url, options=options, **kw)


# --- many instances, one pool -----------------------------------------------------------------------------


async def test_five_livekit_handoffs_hold_one_nineninesix_socket(emulator: Emulator) -> None:
    """Five agents after five handoffs: each a new TTS with the same settings, prewarmed and used once."""
    instances = []
    for _ in range(5):
        tts = nns_tts(emulator)
        instances.append(tts)
        tts.prewarm()
        assert await lk_turn(tts) > 0
    assert opened(emulator, NNS) == 1 and emulator.stats.open_sockets(NNS) == 1
    for tts in instances[:-1]:  # four closed: the fifth still uses the socket
        await tts.aclose()
    assert emulator.stats.open_sockets(NNS) == 1
    assert await lk_turn(instances[-1]) > 0
    await instances[-1].aclose()
    await emulator.wait_until(lambda: emulator.stats.open_sockets(NNS) == 0)
    assert codes(emulator, NNS) == [1000]


async def test_five_livekit_handoffs_keep_one_kitta_standby(emulator: Emulator) -> None:
    """Kitta carries one generation per socket: each turn takes the standby, and one standby is kept between
    the five instances (not one each)."""
    instances = []
    for _ in range(5):
        tts = kitta_tts(emulator)
        instances.append(tts)
        tts.prewarm()
        assert await lk_turn(tts) > 0
    dialer = instances[0]._provider_impl.dialer  # the loop's one dialer, and its one standby
    assert all(t._provider_impl.dialer is dialer for t in instances)
    await emulator.wait_until(lambda: emulator.stats.open_sockets(KITTA) == 1)  # the turns' sessions ended
    await emulator.wait_until(lambda: dialer.standby is not None and dialer.standby.quiet)
    assert emulator.stats.open_sockets(KITTA) == 1
    assert opened(emulator, KITTA) == 6  # five sessions (one per turn, the spec's) + the standby waiting now
    assert dialer.hits >= 4  # every turn but maybe the first found the standby warm
    for tts in instances:
        await tts.aclose()
    await emulator.wait_until(lambda: emulator.stats.open_sockets(KITTA) == 0)
    assert set(codes(emulator, KITTA)) <= {1000}, codes(emulator, KITTA)


async def test_prewarm_ten_times_opens_one_socket(emulator: Emulator) -> None:
    nns_provider, kitta_provider = nns(emulator), kitta(emulator)
    try:
        await asyncio.gather(*(nns_provider.prewarm(24000) for _ in range(10)))
        await asyncio.gather(*(kitta_provider.prewarm() for _ in range(10)))
        tts = nns_tts(emulator)
        for _ in range(10):
            tts.prewarm()
        await asyncio.wait_for(tts._prewarm_task, 5)
        for _ in range(10):
            tts.prewarm()
        await asyncio.wait_for(tts._prewarm_task, 5)
        assert opened(emulator, NNS) == 1  # the provider's and the TTS's: the same settings, one pool
        assert opened(emulator, KITTA) == 1
        await tts.aclose()
    finally:
        await nns_provider.aclose()
        await kitta_provider.aclose()
    await emulator.wait_until(lambda: emulator.stats.open_sockets() == 0)
    assert codes(emulator) == [1000, 1000]


async def test_different_settings_do_not_share(emulator: Emulator) -> None:
    a, b = nns(emulator), nns(emulator, receive_timeout=7.0)
    try:
        await a.prewarm(24000)
        await b.prewarm(24000)
        assert a.dialer is not b.dialer
        assert opened(emulator, NNS) == 2
    finally:
        await a.aclose()
        await b.aclose()


async def test_closing_one_instance_keeps_what_another_uses(emulator: Emulator) -> None:
    a, b = nns(emulator), nns(emulator)
    assert await one_turn(a) and await one_turn(b)
    assert a.dialer is b.dialer and opened(emulator, NNS) == 1
    await a.aclose()
    assert emulator.stats.open_sockets(NNS) == 1 and await one_turn(b)
    with pytest.raises(TTSConnectionError):
        await a.open_turn(sample_rate=24000)
    await b.aclose()
    await emulator.wait_until(lambda: emulator.stats.open_sockets(NNS) == 0)
    assert codes(emulator, NNS) == [1000] and shared_count() == 0


async def test_closing_one_instance_mid_turn_cancels_only_its_turn(emulator: Emulator) -> None:
    emulator.config.realtime_factor = 1.0  # paced: both turns are still speaking
    a, b = nns(emulator), nns(emulator)
    try:
        turn_a = await a.open_turn(sample_rate=24000)
        await turn_a.send("A sentence that is still being spoken when its provider closes. ")
        reading_b = asyncio.ensure_future(one_turn(b, "The other provider speaks on. "))
        await emulator.wait_until(lambda: emulator.stats.contexts_started == 2)
        await asyncio.wait_for(a.aclose(), 5)

        async def drain() -> None:
            async for _ in turn_a:
                pass

        await asyncio.wait_for(drain(), 2)  # ends without an error: cancelled, not failed
        assert turn_a.outcome == "cancelled"
        assert await reading_b  # the shared socket carried b's turn to its end
        assert emulator.stats.contexts_cancelled == 1
    finally:
        await b.aclose()


# --- nothing reopens after aclose --------------------------------------------------------------------------


async def test_nothing_reopens_after_aclose(emulator: Emulator) -> None:
    tts, provider = nns_tts(emulator), kitta(emulator, standby_max_age=0.2)
    await provider.prewarm()
    tts.prewarm()
    await asyncio.wait_for(tts._prewarm_task, 5)
    before = len(emulator.stats.connections)
    await tts.aclose()
    await provider.aclose()
    tts.prewarm()
    await provider.prewarm()
    await tts.turn_provider.prewarm(24000)
    assert tts._prewarm_task is None
    # every background task is gone: nothing is left that could reconnect (the standby keeper included)
    ours = [t for t in asyncio.all_tasks() if t.get_name().startswith(("kitta-", "nineninesix-", "shared-"))]
    assert not [t for t in ours if not t.done()], ours
    await emulator.wait_until(lambda: emulator.stats.open_sockets() == 0)
    assert len(emulator.stats.connections) == before
    assert set(codes(emulator)) == {1000}


# --- prewarm failures --------------------------------------------------------------------------------------


async def test_a_failed_prewarm_warns_once_redacted_and_the_first_turn_raises_the_real_error(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    from livekit.agents import APIStatusError

    from livekit.plugins import nineninesix

    key = emulator.api_key
    emulator.config.api_keys = {"sk_996_some_other_key_0123456789"}  # ours is refused now
    tts = nineninesix.TTS(key, base_url=emulator.base_url, voice=TONE_VOICE_ID)
    try:
        with caplog.at_level(logging.WARNING):
            for _ in range(3):
                tts.prewarm()
                await asyncio.wait_for(tts._prewarm_task, 5)
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING and "prewarm" in r.getMessage()]
        assert len(warnings) == 1
        assert key not in caplog.text
        with pytest.raises(APIStatusError) as info:
            await lk_turn(tts)
        assert info.value.status_code == 401 and key not in str(info.value)
    finally:
        await tts.aclose()


# --- loops ------------------------------------------------------------------------------------------------


def test_an_instance_built_with_no_loop_works_once_one_runs(emulator_port: Emulator) -> None:
    emu = emulator_port
    provider = nns(emu)  # no loop runs here (prewarm_fnc, import time)
    tts = nns_tts(emu)
    tts.prewarm()  # no loop: does nothing, and says nothing

    async def job() -> None:
        assert await one_turn(provider) and await lk_turn(tts) > 0
        await provider.aclose()
        await tts.aclose()

    asyncio.run(job())
    assert len(emu.stats.sockets(NNS)) == 1
    wait_from_outside(lambda: codes(emu, NNS) == [1000])


def test_two_loops_in_one_process_each_get_their_own_pool(emulator_port: Emulator) -> None:
    """The THREAD executor's shape: two jobs on two loops in two threads, the same settings; one instance
    built before both is used by both. No pool crosses a loop, no "different loop" error."""
    emu = emulator_port
    shared_instance = nns(emu)
    errors: list[BaseException] = []
    ready = threading.Barrier(2, timeout=10)

    def job() -> None:
        async def run() -> None:
            own = nns(emu)
            assert await one_turn(own)
            ready.wait()  # both loops hold their pool at once
            assert await one_turn(shared_instance)
            assert shared_instance.dialer is own.dialer  # this loop's
            await own.aclose()
            assert emu.stats.open_sockets(NNS) >= 1  # the instance built before both still holds it
            await close_loop()  # the job's end (LiveKit's shutdown callback does this)

        try:
            asyncio.run(run())
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=job) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len(emu.stats.sockets(NNS)) == 2
    wait_from_outside(lambda: codes(emu, NNS) == [1000, 1000])
    asyncio.run(shared_instance.aclose())  # its leases were on loops now closed: nothing to do, no error
