"""The LiveKit internals the plugins touch are still there, with the shape the plugins rely on.

Each one is listed in docs/compatibility.md (why, and the public alternative when there is one). A LiveKit
release that renamed one would break a plugin quietly or late (a stream that never ends its input, metrics
without acquire time); these tests fail loudly instead, naming the attribute.
"""

from __future__ import annotations

import inspect

from livekit.agents import tts
from lk_helpers import FAST, make_tts

from ttsbridge.emulator import Emulator
from ttsbridge.livekit._stream import TurnSynthesizeStream


async def test_the_stream_state_the_plugins_use_is_there(emu: Emulator) -> None:
    t = make_tts(emu)
    try:
        stream = t.stream(conn_options=FAST)
        try:
            assert isinstance(stream, TurnSynthesizeStream)
            # input: the channel the plugin reads and the flush marker in it
            assert hasattr(stream, "_input_ch") and isinstance(tts.SynthesizeStream._FlushSentinel, type)
            # metrics: what LiveKit's TTSMetrics carries and the plugin fills in
            assert isinstance(stream._acquire_time, float) and isinstance(stream._connection_reused, bool)
            assert stream._started_time == 0 and callable(stream._mark_started)  # (0 until text is pushed)
            assert stream._conn_options is FAST and stream._tts is t
        finally:
            await stream.aclose()
        chunked = t.synthesize("Hello.", conn_options=FAST)
        try:
            assert chunked._input_text == "Hello." and chunked._conn_options is FAST
        finally:
            await chunked.aclose()
        assert isinstance(t._label, str) and t._label  # the label LiveKit's own metrics carry
    finally:
        await t.aclose()


def test_the_emitter_notes_provider_request_ids() -> None:
    # read with getattr (absent before LiveKit 1.8): tracing records a retried turn's new id with it
    assert callable(getattr(tts.AudioEmitter, "_note_provider_request_id", None))
    assert list(inspect.signature(tts.AudioEmitter._note_provider_request_id).parameters) == [
        "self",
        "context_id",
    ]
