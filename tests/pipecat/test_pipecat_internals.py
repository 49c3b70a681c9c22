"""The Pipecat internals the adapters touch are still there, with the shape the adapters rely on.

Each one is listed in docs/compatibility.md (why, and the public alternative when there is one). The
adapters read most of them defensively (``getattr(..., None)``), so a Pipecat release that renamed one
would make a feature quietly do nothing: these tests fail loudly instead, naming the attribute.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from pc_helpers import make_tts
from pipecat.services.tts_service import TTSContext, TTSService, WebsocketTTSService
from pipecat.utils.context.aggregated_frame_sequencer import AggregatedFrameSequencer, _AggregatedFrameSlot
from pipecat.utils.context.word_timestamp_tracker import WordTimestampTracker
from pipecat.utils.tracing import service_decorators

from ttsbridge.emulator import Emulator

#: protected methods of TTSService the adapters override or call, with the parameters they pass
METHODS = {
    "_register_spoken_text": ["src_frame", "text", "context_id"],
    "_record_context_audio_outcome": ["context_id", "received_audio"],
    "_synthesize_text": ["text", "context_id"],
    "_add_word_timestamps": ["word_times", "context_id"],
    "_push_sequencer_frames": ["frames", "context_id"],
    "_refresh_audio_context": ["context_id"],
    "_handle_interruption": ["frame", "direction"],
    "_update_settings": None,
}


@pytest.mark.parametrize("name", list(METHODS))
def test_the_protected_methods_the_adapters_use_exist(name: str) -> None:
    method = getattr(TTSService, name, None)
    assert callable(method), f"pipecat TTSService.{name} is gone"
    params = METHODS[name]
    if params is not None:
        got = [p for p in inspect.signature(method).parameters if p != "self"]
        assert got[: len(params)] == params, f"TTSService.{name}{inspect.signature(method)}"


def test_the_protected_state_the_adapters_read_is_there(emu: Emulator) -> None:
    tts = make_tts(emu)
    assert isinstance(tts, WebsocketTTSService)
    # the sequencer that puts the spoken words in the LLM context, and its slots (a failed turn's text)
    sequencer = tts._aggregated_frame_sequencer
    assert isinstance(sequencer, AggregatedFrameSequencer) and isinstance(sequencer._slots, list)
    fields = {f.name for f in dataclasses.fields(_AggregatedFrameSlot)}
    assert {"context_id", "spoken", "complete"} <= fields
    assert callable(sequencer.finalize) and callable(sequencer.flush)
    # word playback (characters heard), audio contexts (interruption), the turn's context id, timeouts
    assert isinstance(tts._word_timestamp_tracker, WordTimestampTracker)
    assert isinstance(tts._word_timestamp_tracker.started, bool)
    assert isinstance(tts._tts_contexts, dict) and "interruptible" in {
        f.name for f in dataclasses.fields(TTSContext)
    }
    assert hasattr(tts._audio_context_manager, "playing_context_id")
    assert tts._turn_context_id is None and isinstance(tts._stop_frame_timeout_s, float)
    assert isinstance(tts._is_streaming_tokens, bool) and isinstance(
        tts._is_yielding_frames_synchronously, bool
    )
    assert tts._text_aggregator is not None and hasattr(tts._text_aggregator, "language")
    assert isinstance(tts._disconnecting, bool)
    assert tts._metrics is not None and tts._settings is not None
    assert callable(tts._call_event_handler) and callable(tts._register_event_handler)


def test_the_tts_span_store_is_where_the_tracing_reads_it() -> None:
    # Pipecat's traced_tts keeps each context's span in service._tts_spans[context_id]["span"]
    source = inspect.getsource(service_decorators)
    assert "service._tts_spans = {}" in source
    assert 'service._tts_spans[context_id] = {"span": span' in source
