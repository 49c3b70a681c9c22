"""Pipecat: a ``ServiceSwitcher`` of two services of one provider (the same settings) holds one socket between
them, and the pipeline's end (``EndFrame``, ``CancelFrame``) closes it with 1000. Counted on the server side."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pipecat.frames.frames import EndFrame, Frame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.service_switcher import ServiceSwitcher, ServiceSwitcherStrategyManual
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner
from prod_helpers import codes

from ttsbridge.emulator import TONE_VOICE_ID, Emulator
from ttsbridge.pipecat import KittaTTSService, NineninesixTTSService

BOUND = 30.0


class Probe(FrameProcessor):
    def __init__(self) -> None:
        super().__init__()
        self.audio = asyncio.Event()
        self.stopped = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio.set()
        if isinstance(frame, TTSStoppedFrame):
            self.stopped.set()
        await self.push_frame(frame, direction)


def _service(emu: Emulator, provider: str) -> Any:
    if provider == "nineninesix":
        return NineninesixTTSService(
            emu.api_key, base_url=emu.base_url, settings=NineninesixTTSService.Settings(voice=TONE_VOICE_ID)
        )
    return KittaTTSService(
        emu.api_key_for("kitta"),
        base_url=emu.base_url,
        settings=KittaTTSService.Settings(voice=TONE_VOICE_ID),
    )


@pytest.mark.parametrize("ending", ["EndFrame", "CancelFrame"])
@pytest.mark.parametrize("provider", ["nineninesix", "kitta"])
async def test_a_switcher_of_two_services_holds_one_socket_and_the_pipelines_end_closes_it(
    emulator: Emulator, provider: str, ending: str
) -> None:
    first, second = _service(emulator, provider), _service(emulator, provider)
    switcher = ServiceSwitcher([first, second], strategy_type=ServiceSwitcherStrategyManual)
    probe = Probe()
    task = PipelineWorker(
        Pipeline([switcher, probe]),
        params=PipelineParams(audio_out_sample_rate=24000),
        cancel_on_idle_timeout=False,
    )
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(task)
    running = asyncio.ensure_future(runner.run())
    try:
        await task.queue_frames([TTSSpeakFrame("Hello there, how are you?")])
        await asyncio.wait_for(probe.stopped.wait(), BOUND)
        assert probe.audio.is_set()
        # both services started (each warmed its provider): one socket between them
        await emulator.wait_until(lambda: emulator.stats.open_sockets(provider) == 1, timeout=BOUND)
        if provider == "nineninesix":
            assert len(emulator.stats.sockets(provider)) == 1
        else:  # the turn's own session (one generation per socket) and one standby, not one per service
            assert len(emulator.stats.sockets(provider)) == 2
        if ending == "EndFrame":
            await task.queue_frame(EndFrame())
        else:
            await task.cancel()
        await asyncio.wait_for(running, BOUND)
    finally:
        if not running.done():
            await task.cancel()
            await asyncio.wait_for(running, BOUND)
    await emulator.wait_until(lambda: emulator.stats.open_sockets() == 0, timeout=BOUND)
    assert codes(emulator) == [1000] * len(emulator.stats.connections), emulator.stats.connections
