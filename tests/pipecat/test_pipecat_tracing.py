"""OpenTelemetry: our services are traced as Pipecat's own TTS services (``traced_tts``: one ``tts`` span per
audio context), and that span carries our per-turn facts. Run with ``PipelineWorker(enable_tracing=True)``
against the emulator; spans go to the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pc_helpers import RUN_TIMEOUT, S1, S2, Gate, InterruptWhen, Probe, WaitFor, make_tts
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    LLMTextFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.processors.frame_processor import FrameProcessor
from pipecat.workers.runner import WorkerRunner

from otel_support import attrs, named
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, Fault
from ttsbridge.pipecat import KittaTTSService, NineninesixHttpTTSService

NEXT = "Is there anything else?"


def turn(*sentences: str) -> list[Frame]:
    text = " ".join(sentences)
    return [
        LLMFullResponseStartFrame(),
        *[LLMTextFrame(text[i : i + 6]) for i in range(0, len(text), 6)],
        LLMFullResponseEndFrame(),
    ]


async def run_traced(processors: Sequence[FrameProcessor], frames: Sequence[Frame]) -> None:
    """Run the pipeline as an application with tracing on would (``enable_tracing=True``), metrics on."""
    params = PipelineParams(audio_out_sample_rate=24000, enable_metrics=True, enable_usage_metrics=True)
    worker = PipelineWorker(
        Pipeline(list(processors)), params=params, enable_tracing=True, cancel_on_idle_timeout=False
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(_worker: PipelineWorker, _frame: Frame) -> None:
        started.set()

    async def push() -> None:
        await asyncio.wait_for(started.wait(), 10.0)
        for frame in frames:
            await worker.queue_frame(frame)
        await worker.queue_frame(EndFrame())

    runner = WorkerRunner()
    await runner.add_workers(worker)
    await asyncio.wait_for(asyncio.gather(runner.run(), push()), RUN_TIMEOUT)


def server_contexts(emu: Emulator) -> list[str]:
    return list(dict.fromkeys(m["context_id"] for _, m in emu.stats.messages if m.get("context_id")))


def transcripts_of(emu: Emulator, context_id: str) -> str:
    return "".join(
        m.get("transcript", "") for _, m in emu.stats.messages if m.get("context_id") == context_id
    )


async def test_websocket_turn_is_one_tts_span_with_pipecat_and_our_attributes(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    emu.add_fault(Fault(trigger="Hello there", action="error", error_code="concurrent_limit"))
    tts = make_tts(emu)
    probe = Probe()
    await run_traced([Gate(), tts, probe], [*turn(S1, S2), WaitFor(probe.stopped), *turn(NEXT)])

    first, second = (attrs(s) for s in named(spans, "tts"))
    # Pipecat's own attributes
    assert first["gen_ai.operation.name"] == "tts"
    assert S1 in first["text"] and S2 in first["text"]
    assert first["metrics.ttfb"] > 0
    # ours, under Pipecat's names where it has them
    assert first["gen_ai.provider.name"] == "nineninesix"
    assert first["voice_id"] == TONE_VOICE_ID
    assert first["gen_ai.request.model"] == tts.provider.options.model
    # the retry landed on a fresh context: the span names the one that spoke, and counts the retry
    contexts = server_contexts(emu)
    assert len(contexts) == 3
    assert first["ttsbridge.request_id"] == contexts[1]
    assert first["ttsbridge.retries"] == 1
    assert second["ttsbridge.request_id"] == contexts[2]
    assert second["ttsbridge.retries"] == 0
    assert first["ttsbridge.characters_sent"] == len(transcripts_of(emu, contexts[1]))
    assert first["ttsbridge.wire_format"] == tts.provider.describe(sample_rate=24000)["wire_format"]
    assert first["ttsbridge.wire_format"].startswith("pcm_s16le@")
    assert first["ttsbridge.ttfa"] > 0
    assert second["ttsbridge.connection_reused"] is True  # the first turn's socket
    assert [first["ttsbridge.outcome"], second["ttsbridge.outcome"]] == ["done", "done"]
    assert "ttsbridge.error_code" not in first


async def test_http_turn_is_one_tts_span_adding_up_its_requests(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    tts = NineninesixHttpTTSService(
        emu.api_key, base_url=emu.base_url, settings=NineninesixHttpTTSService.Settings(voice=TONE_VOICE_ID)
    )
    await run_traced([tts, Probe()], turn(S1, S2))

    (span,) = named(spans, "tts")
    a = attrs(span)
    assert emu.stats.http_requests == 2  # one request per sentence, one span for the turn
    assert a["gen_ai.provider.name"] == "nineninesix"
    assert a["voice_id"] == TONE_VOICE_ID
    assert a["ttsbridge.characters_sent"] == a["metrics.character_count"]  # the texts Pipecat handed over
    assert a["ttsbridge.wire_format"] == tts.provider.describe(sample_rate=24000)["wire_format"]
    assert a["ttsbridge.ttfa"] > 0
    assert a["ttsbridge.outcome"] == "done"
    assert a["ttsbridge.retries"] == 0


async def test_barge_in_span_says_cancelled(emu: Emulator, spans: InMemorySpanExporter) -> None:
    emu.config.realtime_factor = 2.0  # still generating when the interruption lands
    tts = make_tts(emu)
    probe = Probe()
    await run_traced([Gate(), tts, probe], [*turn(S1, S2), InterruptWhen(probe.first_audio), *turn(NEXT)])
    interrupted, after = (attrs(s) for s in named(spans, "tts"))
    assert interrupted["ttsbridge.outcome"] == "cancelled"
    assert interrupted["tts.interrupted"] is True  # Pipecat's own mark
    assert interrupted["ttsbridge.request_id"] == server_contexts(emu)[0]
    assert after["ttsbridge.outcome"] == "done"


async def test_failed_turn_span_says_failed_with_the_code(emu: Emulator, spans: InMemorySpanExporter) -> None:
    emu.add_fault(Fault(trigger="warehouse", action="error", error_code="generation_failed"))
    tts = make_tts(emu)
    await run_traced([Gate(), tts, Probe()], turn("Your order left the warehouse this morning."))

    (span,) = named(spans, "tts")
    a = attrs(span)
    assert a["ttsbridge.outcome"] == "failed"
    assert a["ttsbridge.error_code"] == a["error.type"] == "generation_failed"
    assert span.status.status_code is StatusCode.ERROR


async def test_kitta_turn_span(emu: Emulator, spans: InMemorySpanExporter) -> None:
    kitta = emu.config.kitta
    tts = KittaTTSService(
        kitta.a_valid_key(), base_url=emu.base_url, settings=KittaTTSService.Settings(voice=TONE_VOICE_ID)
    )
    await run_traced([Gate(), tts, Probe()], turn(S1))

    (span,) = named(spans, "tts")
    a = attrs(span)
    assert a["gen_ai.provider.name"] == "kitta"
    assert a["voice_id"] == TONE_VOICE_ID
    assert a["gen_ai.request.model"] == tts.provider.options.model
    assert a["ttsbridge.wire_format"].startswith("pcm@")  # the rate the session's ready announced
    assert a["ttsbridge.request_id"]
    assert a["ttsbridge.characters_sent"] == len(S1)
    assert a["ttsbridge.outcome"] == "done"
    assert a["ttsbridge.ttfa"] > 0
