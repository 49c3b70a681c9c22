"""A LiveKit agent's job, run by LiveKit's own job executors (PROCESS and THREAD) in
``test_livekit_worker_shapes.py``. Module-level functions: a spawned job process imports them by name.

The emulator's address and keys come from the environment (a job process inherits it). Nothing here calls
``aclose()`` on a TTS: the job's end must close every connection the plugins opened for it."""

from __future__ import annotations

import asyncio
import os

from livekit.agents import APIConnectOptions, JobContext, JobProcess, tts

from livekit.plugins import kitta, nineninesix

VOICE = "tone"


def _nns(**kw: object) -> nineninesix.TTS:
    return nineninesix.TTS(
        os.environ["TTSB_TEST_NNS_KEY"],
        base_url=os.environ["TTSB_TEST_URL"],
        voice=VOICE,
        **kw,  # type: ignore[arg-type]
    )


def _kitta() -> kitta.TTS:
    return kitta.TTS(os.environ["TTSB_TEST_KITTA_KEY"], base_url=os.environ["TTSB_TEST_URL"], voice=VOICE)


def prewarm(proc: JobProcess) -> None:
    """``prewarm_fnc``: runs where no job loop exists yet; the TTS built here serves the job."""
    proc.userdata["tts"] = _nns()
    proc.userdata["tts"].prewarm()  # no loop: does nothing, and must not break the instance


async def _turn(t: tts.TTS, text: str = "Hello there. ") -> int:
    async with t.stream(conn_options=APIConnectOptions(max_retry=0, timeout=5.0)) as stream:
        stream.push_text(text)
        stream.end_input()
        return len([ev async for ev in stream])


async def entrypoint(ctx: JobContext) -> None:
    built_in_prewarm: nineninesix.TTS = ctx.proc.userdata["tts"]
    built_in_prewarm.prewarm()
    assert await _turn(built_in_prewarm) > 0
    for _ in range(5):  # five handoffs: a new agent, a new TTS with the same settings, prewarmed, one turn
        agent_tts = _nns()
        agent_tts.prewarm()
        assert await _turn(agent_tts) > 0
    # a FallbackAdapter of two of ours (settings that differ: two pools), each prewarmed; its aclose() leaves
    # its children open, as LiveKit's does
    first, second = (
        _nns(client_options={"receive_timeout": 14.0}),
        _nns(client_options={"receive_timeout": 13.0}),
    )
    adapter = tts.FallbackAdapter([first, second])
    adapter.prewarm()
    second.prewarm()
    assert await _turn(adapter) > 0
    await asyncio.wait_for(second._prewarm_task, 10)  # type: ignore[arg-type]
    await adapter.aclose()
    assert await _turn(_kitta()) > 0  # Kitta: the turn's session, and the standby kept after it
    ctx.shutdown("the test's job is over")
