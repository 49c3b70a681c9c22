"""OpenTelemetry capture for the tracing tests: the SDK's in-memory exporter, no collector.

OTel's global tracer provider can be set only once per process, and Pipecat's ``traced_tts`` (like
LiveKit's tracer, a proxy until one is set) uses the global one. So a provider is installed once, on first
use, and the ``spans`` fixture switches capture on for one test only (later tests record nothing).

``tests/conftest.py`` imports the ``spans`` fixture, so every test can take it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _Capture(SpanProcessor):
    """Exports ended spans to the in-memory exporter while a test has capture switched on."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.on = False

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if self.on:
            self.exporter.export([span])


_capture: _Capture | None = None


def _install() -> _Capture:
    global _capture
    if _capture is None:
        capture = _Capture()
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):  # another global provider was set before: refuse
            raise RuntimeError(f"an OpenTelemetry tracer provider is already set: {provider!r}")
        provider.add_span_processor(capture)
        _capture = capture
    return _capture


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans that end during this test (``spans.get_finished_spans()``)."""
    capture = _install()
    capture.exporter.clear()
    capture.on = True
    try:
        yield capture.exporter
    finally:
        capture.on = False
        capture.exporter.clear()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})
