"""Per-context timing records, shared by both APIs' stats (bench/ reads them as ``emu.stats.timings``)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

__all__ = ["TIMINGS_KEPT", "ContextTiming", "ContextTimings"]

#: how many per-context timing records are kept (the oldest go first)
TIMINGS_KEPT = 4096


@dataclass
class ContextTiming:
    """When the server got a context's first request and sent its first chunk (``time.perf_counter()``)."""

    first_request: float
    first_chunk: float | None = None
    #: the first request's text (up to 80 characters): lets a bench match a record to its turn
    text: str = ""


@dataclass
class ContextTimings:
    """Per ``context_id`` (Nineninesix) / ``request_id`` (Kitta): the server's own time from the first request
    (Kitta: first ``text``) to the first chunk sent; the newest ``TIMINGS_KEPT``. One object is shared by
    both APIs' stats, so ``records`` holds both."""

    records: dict[str, ContextTiming] = field(default_factory=dict)

    def mark_request(self, key: str, text: str) -> None:
        """Record the first request of ``key`` (later ones are ignored)."""
        if key not in self.records:
            self.records[key] = ContextTiming(time.perf_counter(), None, text[:80])
            while len(self.records) > TIMINGS_KEPT:
                self.records.pop(next(iter(self.records)))

    def mark_chunk(self, key: str) -> None:
        """Record the first chunk sent for ``key`` (after its first request)."""
        t = self.records.get(key)
        if t is not None and t.first_chunk is None:
            t.first_chunk = time.perf_counter()
