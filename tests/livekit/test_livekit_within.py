"""``livekit._tasks.within``: a bounded await in the caller's task whose cancellation is never lost.

Pure asyncio (no sockets): what the stream's opening relies on when ``aclose()`` races the turn's opening.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from ttsbridge.livekit._tasks import within


async def test_the_result_comes_back_in_the_callers_task() -> None:
    seen: list[asyncio.Task[object] | None] = []

    async def opening() -> str:
        seen.append(asyncio.current_task())
        return "turn"

    async def caller() -> str:
        return await within(opening(), 1.0)

    task = asyncio.create_task(caller())
    assert await asyncio.wait_for(task, 5.0) == "turn"
    if sys.version_info >= (3, 11):
        assert seen == [task]  # no task of its own (3.10: a task of its own, then the result)


async def test_a_late_result_is_a_timeout_and_the_opening_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def slow() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(within(slow(), 0.01), 5.0)
    assert cancelled.is_set()


async def test_a_cancellation_swallowed_by_the_opening_is_honoured_and_its_result_discarded() -> None:
    """The caller is cancelled while the opening finishes and swallows the cancellation (returns anyway):
    the caller still ends cancelled, and the turn it would have got is handed to ``discard``."""
    started = asyncio.Event()
    discarded: list[str] = []

    async def stubborn() -> str:
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass  # finishes its work regardless
        return "turn"

    async def discard(turn: str) -> None:
        discarded.append(turn)

    task = asyncio.create_task(within(stubborn(), 5.0, discard=discard))
    await asyncio.wait_for(started.wait(), 5.0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5.0)
    assert discarded == ["turn"]


# --- deliver_held_audio: a failed stream's held audio, never on a cancellation -----------------------------------


def _emitter() -> tuple[object, object]:
    from livekit.agents import tts, utils

    dst: utils.aio.Chan[tts.SynthesizedAudio] = utils.aio.Chan()
    emitter = tts.AudioEmitter(label="test", dst_ch=dst)
    emitter.initialize(request_id="r", sample_rate=16000, num_channels=1, mime_type="audio/pcm", stream=True)
    emitter.start_segment(segment_id="s")
    emitter.push(b"\x01\x00" * 1600)  # 100 ms: LiveKit holds part of it back until the input ends
    return emitter, dst


def _final_frames(dst: object) -> list[object]:
    out = []
    while True:
        try:
            ev = dst.recv_nowait()  # type: ignore[attr-defined]
        except Exception:
            return out
        if ev.is_final:
            out.append(ev)


async def test_held_audio_is_delivered_when_a_stream_fails() -> None:
    from ttsbridge.livekit._tasks import deliver_held_audio

    emitter, dst = _emitter()
    await asyncio.wait_for(deliver_held_audio(emitter, 1.0), 5.0)  # type: ignore[arg-type]
    assert len(_final_frames(dst)) == 1, "the input was ended and the emitter flushed to its final frame"
    await emitter.aclose()  # type: ignore[attr-defined]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Task.cancelling() is 3.11+")
async def test_no_held_audio_once_the_stream_is_being_cancelled_even_if_the_cancel_was_swallowed() -> None:
    from ttsbridge.livekit._tasks import cancel_pending, deliver_held_audio

    emitter, dst = _emitter()

    async def failed_stream_being_closed() -> bool:
        asyncio.current_task().cancel()  # type: ignore[union-attr]  # aclose() of the stream...
        try:
            await asyncio.sleep(0)
        except asyncio.CancelledError:
            pass  # ...swallowed on the way (as asyncio.wait_for can, on 3.11)
        await deliver_held_audio(emitter, 1.0)  # type: ignore[arg-type]
        return cancel_pending()

    assert await asyncio.wait_for(asyncio.create_task(failed_stream_being_closed()), 5.0) is True
    assert _final_frames(dst) == [], "a barge-in gets nothing more"
    await emitter.aclose()  # type: ignore[attr-defined]
