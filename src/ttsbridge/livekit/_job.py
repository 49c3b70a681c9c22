"""A LiveKit job's end closes what ttsbridge opened for it: :func:`bind_job`.

A job's connections live on its event loop (one job per process, or one per thread and loop with the THREAD
executor), shared there by every ``TTS`` instance with the same settings (:mod:`ttsbridge.engine.shared`). The
first time an instance is used inside a job (``prewarm()``, ``stream()``, ``synthesize()``: also inside a
``FallbackAdapter``, whose own ``aclose()`` does not close its children), a shutdown callback is added to that
job; when the job ends it closes every shared connection of the job's loop with 1000, bounded, whether or
not the user called ``aclose()``. The instances stay usable: one used again (a TTS built in ``prewarm_fnc``
and kept for the process's next job) opens new connections on that job's loop.
"""

from __future__ import annotations

import logging
import weakref

from ttsbridge.engine.shared import close_loop

__all__ = ["bind_job"]

logger = logging.getLogger("ttsbridge.livekit")

_bound: weakref.WeakSet[object] = weakref.WeakSet()  # jobs whose end closes their loop's connections


def bind_job() -> None:
    """Inside a job (on its loop): make sure its end closes this loop's shared connections (once per job)."""
    try:
        from livekit.agents import get_job_context

        ctx = get_job_context(required=False)
    except Exception:  # a LiveKit without it: the user's aclose() closes
        return
    if ctx is None or ctx in _bound:
        return
    _bound.add(ctx)
    ctx.add_shutdown_callback(close_job_connections)


async def close_job_connections(reason: str = "") -> None:
    """The job ended: every shared connection of its loop closes (1000), bounded."""
    logger.debug("job ended (%s): closing its TTS connections", reason or "no reason")
    await close_loop()
