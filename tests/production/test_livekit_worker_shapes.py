"""A LiveKit job run by the framework's own executors (PROCESS: a spawned job process; THREAD: a job thread
with its own loop), with a fake room, as LiveKit's own tests run jobs (a LiveKit server cannot be started
offline). The job (lk_worker_job.py) builds its TTS in ``prewarm_fnc``, does five handoffs, uses a
FallbackAdapter of two of ours and a Kitta TTS, and never calls ``aclose()`` on a TTS: the job's end must close
every connection with 1000. Counted on the server side (the emulator's connection log)."""

from __future__ import annotations

import asyncio
import multiprocessing
import uuid

import pytest
from prod_helpers import codes

from ttsbridge.emulator import Emulator

pytestmark = pytest.mark.timeout(120)


def _job_info() -> object:
    from livekit.agents.job import JobAcceptArguments, RunningJobInfo
    from livekit.protocol import agent

    return RunningJobInfo(
        accept_arguments=JobAcceptArguments(name="", identity="agent", metadata=""),
        job=agent.Job(id=f"job-{uuid.uuid4().hex[:8]}", type=agent.JobType.JT_ROOM),
        url="",
        token="",
        worker_id="test",
        fake_job=True,
    )


@pytest.mark.parametrize("executor", ["THREAD", "PROCESS"])
async def test_a_job_closes_every_connection_it_opened_with_1000(
    executor: str, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lk_worker_job
    from livekit.agents import JobExecutorType, ipc

    monkeypatch.setenv("TTSB_TEST_URL", emulator.base_url)
    monkeypatch.setenv("TTSB_TEST_NNS_KEY", emulator.api_key)
    monkeypatch.setenv("TTSB_TEST_KITTA_KEY", emulator.api_key_for("kitta"))
    pool = ipc.proc_pool.ProcPool(
        initialize_process_fnc=lk_worker_job.prewarm,
        job_entrypoint_fnc=lk_worker_job.entrypoint,
        session_end_fnc=None,
        simulation_end_fnc=None,
        num_idle_processes=1,
        initialize_timeout=60.0,
        close_timeout=20.0,
        session_end_timeout=10.0,
        inference_executor=None,
        job_executor_type=JobExecutorType[executor],
        mp_ctx=multiprocessing.get_context("spawn"),
        memory_warn_mb=0,
        memory_limit_mb=0,
        http_proxy=None,
        loop=asyncio.get_running_loop(),
    )
    await pool.start()
    try:
        await pool.launch_job(_job_info())  # type: ignore[arg-type]
        # the job ran (its Kitta turn is the last thing it does) and ended: every socket is closed
        await emulator.wait_until(lambda: emulator.stats.kitta.sessions == 1, timeout=60)
        await emulator.wait_until(
            lambda: emulator.stats.connections and emulator.stats.open_sockets() == 0, timeout=30
        )
    finally:
        await pool.aclose()
    nns = emulator.stats.sockets("nineninesix")
    # the prewarm_fnc's TTS and the five handoffs' share one socket; the FallbackAdapter's two have theirs
    assert len(nns) == 3, nns
    assert codes(emulator) == [1000] * len(emulator.stats.connections), emulator.stats.connections
