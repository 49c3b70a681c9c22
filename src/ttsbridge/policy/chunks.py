"""Audio chunks already queued behind the one just read, joined to it (one buffer, one frame downstream).

A turn may offer ``take_ready(max_bytes) -> bytes``: the PCM already received, without waiting. Joining it to
the chunk just read saves a frame (and its per-frame cost in the framework) per queued chunk when the reader
fell behind; it never delays audio. Pure: no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["joiner"]


def joiner(turn: object, *, rate: int, coalesce_s: float) -> Callable[[bytes], bytes]:
    """``join(pcm)``: ``pcm`` followed by what ``turn.take_ready`` has queued, up to ``coalesce_s`` of PCM16 at
    ``rate``. Built once per turn (the lookup and the limit are not redone per chunk); a turn without
    ``take_ready`` gets the identity."""
    take_ready: Callable[[int], bytes] | None = getattr(turn, "take_ready", None)
    limit = max(2, int(coalesce_s * rate) * 2)
    if take_ready is None:
        return lambda pcm: pcm

    def join(pcm: bytes) -> bytes:
        if len(pcm) >= limit:
            return pcm
        more = take_ready(limit - len(pcm))
        return pcm + more if more else pcm

    return join

