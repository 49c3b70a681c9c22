"""Audio chunks already queued behind the one just read, joined to it (one buffer, one frame downstream).

A turn may offer ``take_ready(max_bytes) -> bytes``: the PCM already received, without waiting. Joining it to
the chunk just read saves a frame (and its per-frame cost in the framework) per queued chunk when the reader
fell behind; it never delays audio. Pure: no clock, no I/O.
"""

from __future__ import annotations

__all__ = ["with_ready"]


def with_ready(turn: object, pcm: bytes, *, rate: int, coalesce_s: float) -> bytes:
    """``pcm`` followed by what ``turn.take_ready`` has queued, up to ``coalesce_s`` of PCM16 at ``rate``."""
    take_ready = getattr(turn, "take_ready", None)
    limit = max(2, int(coalesce_s * rate) * 2)
    if take_ready is None or len(pcm) >= limit:
        return pcm
    more: bytes = take_ready(limit - len(pcm))
    return pcm + more if more else pcm
