"""Bench-only trials of changes that belong to the provider clients (not applied in ``src/``).

The clients are being moved onto the shared turn engine; these patches let the overhead bench and the
profiler measure, on today's client, what two such changes would buy:

- ``--trial-coalesce``: ``NineninesixTurn.take_ready(max_bytes) -> bytes``, the non-blocking "every chunk
  already queued" call the adapters use when a turn offers it (they hand the chunks to the framework as one
  frame, <= 100 ms). The prototype reads the context's queue; whole chunks only, the end marker and errors
  are left to the iterator.
- ``--trial-no-deflate``: ``compression=None`` on our client's ``websockets.connect`` (no permessage-deflate).
"""

from __future__ import annotations

import argparse
import functools
from typing import Any


def add_trial_flags(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--trial-coalesce", action="store_true", help="bench-only NineninesixTurn.take_ready")
    ap.add_argument("--trial-no-deflate", action="store_true", help="bench-only compression=None on connect")


def apply_trials(args: argparse.Namespace) -> list[str]:
    applied = []
    if getattr(args, "trial_coalesce", False):
        enable_take_ready()
        applied.append("coalesce (take_ready)")
    if getattr(args, "trial_no_deflate", False):
        disable_deflate()
        applied.append("no permessage-deflate")
    return applied


def enable_take_ready() -> None:
    from ttsbridge.nineninesix.provider import NineninesixTurn

    def take_ready(self: Any, max_bytes: int) -> bytes:
        ctx = self._ctx
        if ctx is None or self._cancelled or self._done:
            return b""
        queue = ctx._queue
        waiting = queue._queue  # the deque behind asyncio.Queue: peek without taking the end marker
        scale = self.sample_rate / self._format.sample_rate
        out = bytearray()
        while waiting and isinstance(waiting[0], (bytes, bytearray)):
            if len(out) + len(waiting[0]) * scale > max_bytes:
                break
            out += self._resampler.process(queue.get_nowait())
        if out:
            self._audio_started = True
        return bytes(out)

    NineninesixTurn.take_ready = take_ready  # type: ignore[attr-defined]


def disable_deflate() -> None:
    from ttsbridge.nineninesix import client

    client.connect = functools.partial(client.connect, compression=None)  # type: ignore[assignment]
