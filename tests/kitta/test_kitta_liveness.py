"""A network that dies quietly (issue 18), on Kitta: the standby's keepalive, a silent session's typed error
(never retried under a new request_id), and ``ping_interval`` / ``ping_after_silence`` / ``pong_timeout``
reachable the same way from every surface. Real sockets: the loopback server and the fault proxy."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from loopback import Fault, FaultProxy, LoopbackServer
from support import wait_until
from ttsbridge.errors import TTSInvalidOptionError, TTSSilentConnectionError
from ttsbridge.kitta import KittaOptions, KittaTurnProvider

KEY = "kitta_liveness_test_key"
OPTS = KittaOptions(voice_id="tone", model="fishaudio-s21pro-flash")
FULL = 4 * 441 * 2
FAST = {"ping_interval": 0.3, "ping_after_silence": 0.3, "pong_timeout": 0.3, "backoff_initial": 0.01}


def provider(url: str, **kw: Any) -> KittaTurnProvider:
    return KittaTurnProvider(KEY, base_url=url, options=OPTS, **{**FAST, **kw})


async def speak(prov: KittaTurnProvider, n: int) -> bytes:
    turn = await prov.open_turn(sample_rate=24000)
    await turn.send(f"t{n} hello there")
    await turn.end()

    async def run() -> bytes:
        return b"".join([pcm async for pcm in turn])

    return await asyncio.wait_for(run(), 10)


async def test_a_standby_killed_silently_while_idle_is_found_by_its_keepalive_and_replaced() -> None:
    async with LoopbackServer("kitta") as srv, FaultProxy(srv.port) as proxy:
        prov = provider(proxy.base_url, standby=True)
        try:
            await prov.prewarm()
            first = prov.dialer.standby
            proxy.blackhole_all()
            # the keepalive ping goes unanswered: the standby ends, the loop opens another (no turn needed)
            await wait_until(lambda: prov.dialer.standby not in (None, first) and proxy.connections >= 2, 10)
            await wait_until(lambda: prov.dialer.standby is not None and prov.dialer.standby.usable(), 10)
            await wait_until(lambda: prov.dialer.standby.quiet, 10)
            assert len(await speak(prov, 1)) == FULL
            assert prov.dialer.hits == 1
            assert not [m for m in srv.messages if m.get("event") == "start"][1:]  # one start: the turn's
        finally:
            await prov.aclose()


async def test_a_silent_session_fails_its_turn_at_once_under_one_request_id_and_the_next_turn_speaks() -> (
    None
):
    async with LoopbackServer("kitta") as srv, FaultProxy(srv.port) as proxy:
        prov = provider(proxy.base_url, standby=False, event_timeout=30.0)
        try:
            proxy.arm(Fault("blackhole", 2))  # after authenticated and ready: the server has our start
            turn = await prov.open_turn(sample_rate=24000)
            await turn.send("t1 hello there")
            await turn.end()
            with pytest.raises(TTSSilentConnectionError):
                await asyncio.wait_for(turn.__aiter__().__anext__(), 10)
            assert turn.retries == 0  # no new request_id for a request whose fate is unknown
            starts = [m for m in srv.messages if m.get("event") == "start"]
            assert len(starts) == 1
            assert len(await speak(prov, 2)) == FULL and proxy.connections == 2
        finally:
            await prov.aclose()


async def test_the_liveness_knobs_reach_the_client_from_every_surface() -> None:
    from livekit.plugins import kitta
    from ttsbridge.pipecat import KittaTTSService

    knobs = {"ping_interval": 2.5, "ping_after_silence": 0.7, "pong_timeout": 0.9}
    lk = kitta.TTS(KEY, voice="tone", standby=False, client_options=dict(knobs))
    pc = KittaTTSService(KEY, settings=KittaTTSService.Settings(voice="tone"), standby=False,
                         provider_options=dict(knobs))  # fmt: skip
    fw = KittaTurnProvider(KEY, options=OPTS, standby=False, **knobs)
    for prov in (lk._provider_impl, pc._provider, fw):
        settings = prov.dialer.settings  # this loop's dialer (shared by the three: the same settings)
        assert (settings.ping_interval, settings.ping_after_silence, settings.pong_timeout) == (2.5, 0.7, 0.9)
        await prov.aclose()


@pytest.mark.parametrize(
    ("name", "value"),
    [("ping_interval", 0), ("ping_after_silence", -1.0), ("pong_timeout", 0), ("ping_interval", "5")],
)
def test_a_bad_liveness_knob_is_refused_before_connecting_naming_it(name: str, value: Any) -> None:
    with pytest.raises(TTSInvalidOptionError) as info:
        KittaTurnProvider(KEY, options=OPTS, standby=False, **{name: value})
    assert name in str(info.value)
