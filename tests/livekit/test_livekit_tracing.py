"""OpenTelemetry: the spans LiveKit's base classes open for our plugins (``tts_request`` and, per attempt,
``tts_request_run``) carry our per-turn facts, under LiveKit's names where it has them. Spans go to the SDK's
in-memory exporter through the global tracer provider (LiveKit's tracer follows it)."""

from __future__ import annotations

import asyncio

from lk_helpers import BOUND, FAST, S1, S2, make_tts, run_stream, run_synthesize, stream_until_error
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from livekit.plugins import kitta
from otel_support import attrs, named
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, Fault


def server_contexts(emu: Emulator) -> list[str]:
    return list(dict.fromkeys(m["context_id"] for _, m in emu.stats.messages if m.get("context_id")))


async def test_stream_span_carries_our_attributes(emu: Emulator, spans: InMemorySpanExporter) -> None:
    emu.add_fault(Fault(trigger="Hello there", action="error", error_code="concurrent_limit"))
    t = make_tts(emu)
    try:
        await run_stream(t, S1)
        await run_stream(t, S2)
    finally:
        await t.aclose()

    first, second = (attrs(s) for s in named(spans, "tts_request_run"))
    contexts = server_contexts(emu)
    assert len(contexts) == 3  # the retried context, the one that spoke, the next turn's
    # LiveKit's own: its attempt number, and the provider id noted by start_segment
    assert first["lk.retry_count"] == 0
    assert first["gen_ai.response.id"] == contexts[1]
    assert list(first["lk.provider_request_ids"]) == contexts[:2]  # both of the turn's ids
    # ours
    assert first["ttsbridge.retries"] == 1  # inside one LiveKit attempt
    assert first["ttsbridge.voice"] == TONE_VOICE_ID
    assert first["gen_ai.request.model"] == t.model
    assert (
        first["ttsbridge.wire_format"] == t.turn_provider.describe(sample_rate=t.sample_rate)["wire_format"]
    )
    assert first["ttsbridge.characters_sent"] >= len(S1)
    assert first["gen_ai.response.time_to_first_chunk"] > 0
    assert first["ttsbridge.outcome"] == "done"
    assert second["ttsbridge.connection_reused"] is True
    assert second["gen_ai.response.id"] == contexts[2]


async def test_synthesize_span_carries_our_attributes(emu: Emulator, spans: InMemorySpanExporter) -> None:
    t = make_tts(emu)
    try:
        await run_synthesize(t, S1)
    finally:
        await t.aclose()

    (run,) = named(spans, "tts_request_run")
    a = attrs(run)
    assert a["ttsbridge.characters_sent"] == len(S1)
    assert a["ttsbridge.voice"] == TONE_VOICE_ID
    assert a["ttsbridge.wire_format"] == t.turn_provider.describe(sample_rate=t.sample_rate)["wire_format"]
    assert a["gen_ai.response.time_to_first_chunk"] > 0
    assert a["ttsbridge.outcome"] == "done"


async def test_closed_stream_span_says_cancelled(emu: Emulator, spans: InMemorySpanExporter) -> None:
    t = make_tts(emu)
    try:
        stream = t.stream(conn_options=FAST)
        stream.push_text(f"{S1} That part never finishes [[stall]] at all.")
        stream.end_input()
        await asyncio.wait_for(stream.__anext__(), BOUND)
        await asyncio.wait_for(stream.aclose(), BOUND)  # what LiveKit does on interruption
    finally:
        await t.aclose()

    (run,) = named(spans, "tts_request_run")
    assert attrs(run)["ttsbridge.outcome"] == "cancelled"
    assert "ttsbridge.error_code" not in attrs(run)


async def test_failed_stream_span_says_failed_with_the_code(
    emu: Emulator, spans: InMemorySpanExporter
) -> None:
    emu.add_fault(Fault(trigger="Hello there", action="error", error_code="generation_failed"))
    t = make_tts(emu)
    try:
        await stream_until_error(t, S1, FAST)
    finally:
        await t.aclose()

    (run,) = named(spans, "tts_request_run")
    a = attrs(run)
    assert a["ttsbridge.outcome"] == "failed"
    assert a["ttsbridge.error_code"] == "generation_failed"
    assert a["error.type"] == "500"  # LiveKit's, from the APIStatusError
    assert run.status.status_code is StatusCode.ERROR


async def test_kitta_stream_span(emu: Emulator, spans: InMemorySpanExporter) -> None:
    t = kitta.TTS(emu.config.kitta.a_valid_key(), base_url=emu.base_url, voice=TONE_VOICE_ID)
    try:
        await run_stream(t, S1)
    finally:
        await t.aclose()

    (run,) = named(spans, "tts_request_run")
    a = attrs(run)
    assert a["ttsbridge.voice"] == TONE_VOICE_ID
    assert a["ttsbridge.wire_format"].startswith("pcm@")
    assert a["gen_ai.response.id"] in a["lk.provider_request_ids"]
    assert a["ttsbridge.retries"] == 0
    assert a["ttsbridge.outcome"] == "done"
