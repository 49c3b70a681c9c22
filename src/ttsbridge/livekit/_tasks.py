"""The LiveKit streams' tasks: a cancel-safe ``wait_for`` (:func:`within`), the supervisor of a stream's three
tasks (:func:`supervise`), and the bounded hand-over of the audio an emitter still holds when a stream fails
(:func:`deliver_held_audio`). When the server owes audio is not decided here: it is the turn's one deadline,
kept by the provider's protocol (``APIConnectOptions.timeout`` is passed down as the turn's ``timeout``)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable
from typing import Final, TypeVar

from livekit.agents import tts, utils

__all__ = ["cancel_pending", "deliver_held_audio", "supervise", "within"]

#: How long the receiving side gets to report a failure first when the sending side failed (its error is the
#: turn's real one).
REPORT_WAIT: Final = 1.0


_T = TypeVar("_T")
#: ``asyncio.timeout`` and ``Task.cancelling`` (Python >= 3.11)
_IN_TASK = sys.version_info >= (3, 11)


async def within(
    aw: Awaitable[_T],
    timeout: float,
    *,
    discard: Callable[[_T], Awaitable[object]] | None = None,
) -> _T:
    """``asyncio.wait_for`` without its Python < 3.12 flaw: when the caller is cancelled just as ``aw``
    completes, ``wait_for`` returns the result and the cancellation is lost (a closed stream would go on
    reading). Here the cancellation always propagates; a result that is not returned is handed to
    ``discard`` (e.g. a turn opened for a stream that was closed meanwhile is cancelled).

    On Python >= 3.11 ``aw`` is awaited in the caller's task under ``asyncio.timeout`` (no task, no loop
    hop: this is on the way to a turn's first request); a cancellation that arrived meanwhile and
    that ``aw`` swallowed while completing is still honoured (``Task.cancelling()`` went up)."""
    if _IN_TASK:
        caller = asyncio.current_task()
        pending = caller.cancelling() if caller is not None else 0  # type: ignore[attr-defined]
        async with asyncio.timeout(timeout):  # type: ignore[attr-defined]
            result = await aw
        if caller is not None and caller.cancelling() > pending:  # type: ignore[attr-defined]
            if discard is not None:
                with contextlib.suppress(BaseException):
                    await asyncio.shield(asyncio.ensure_future(discard(result)))
            raise asyncio.CancelledError
        return result
    task = asyncio.ensure_future(aw)
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    except asyncio.CancelledError:
        await utils.aio.cancel_and_wait(task)
        if discard is not None and not task.cancelled() and task.exception() is None:
            with contextlib.suppress(Exception):
                await discard(task.result())
        raise
    if not done:
        await utils.aio.cancel_and_wait(task)
        if not task.cancelled() and task.exception() is None:
            if discard is not None:
                with contextlib.suppress(Exception):
                    await discard(task.result())
        raise asyncio.TimeoutError
    return task.result()


async def supervise(
    send_t: asyncio.Task[None],
    recv_t: asyncio.Task[None],
    input_t: asyncio.Task[None],
) -> None:
    """Wait until the turn's audio is complete; raise the first task error (a late audio is the turn's own
    :class:`~ttsbridge.errors.TTSTimeoutError`, raised by its iteration).

    The receiving side's error is the turn's real one (a send to a turn that just failed only says the turn
    is over), so when sending fails the receiver gets a moment (bounded) to report first.
    """
    tasks = {send_t, recv_t, input_t}
    while True:
        if recv_t.done() and not recv_t.cancelled() and recv_t.exception() is not None:
            raise recv_t.exception()  # type: ignore[misc]
        for t in (send_t, input_t):
            if t.done() and not t.cancelled() and t.exception() is not None:
                if not recv_t.done():
                    await asyncio.wait({recv_t}, timeout=REPORT_WAIT)
                if recv_t.done() and not recv_t.cancelled() and recv_t.exception() is not None:
                    raise recv_t.exception()  # type: ignore[misc]
                raise t.exception()  # type: ignore[misc]
        if send_t.done() and recv_t.done():
            return
        live = {t for t in tasks if not t.done()}
        if live:
            await asyncio.wait(live, return_when=asyncio.FIRST_COMPLETED)


def cancel_pending() -> bool:
    """True when the running task was asked to cancel, including a request that a ``wait_for`` swallowed
    (Python >= 3.11: ``Task.cancelling()``; always False before)."""
    task = asyncio.current_task() if _IN_TASK else None
    return task is not None and task.cancelling() > 0  # type: ignore[attr-defined]


async def deliver_held_audio(emitter: tts.AudioEmitter, timeout: float) -> None:
    """A stream that fails after audio: what LiveKit's emitter still holds of the audio already received (its
    progressive frame, up to ``frame_size_ms``, and a 10 ms tail) goes downstream before the error is raised.
    LiveKit would drop it with the emitter, and the user would miss the end of what the server did send.
    Nothing when the stream is being cancelled (a barge-in wants no more audio, even if a ``wait_for`` on the
    way swallowed the cancellation). Bounded by ``timeout``; a cancellation still propagates."""
    if cancel_pending():
        return
    with contextlib.suppress(Exception):
        emitter.end_input()
        await within(emitter.join(), timeout)
