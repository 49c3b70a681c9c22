"""The one backoff: exponential with full jitter (AWS "Exponential Backoff And Jitter"), honouring a server's
``retry_after``. Pure: the caller waits (or sets a deadline) for the delay it returns."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ttsbridge.errors import TTSInvalidOptionError


@dataclass(frozen=True)
class Backoff:
    """``delay(attempt)`` is uniform in ``[floor * c, c]`` with ``c = min(cap, base * factor ** (attempt - 1))``.

    ``floor=0`` (the default) is full jitter; ``floor=0.5`` is "equal jitter" (never below half the ceiling).
    A ``retry_after`` the server gave is a lower bound (itself bounded by ``max_retry_after``): waiting less
    would only earn the same error.
    """

    base: float = 0.2
    factor: float = 2.0
    cap: float = 10.0
    floor: float = 0.0
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        for name in ("base", "cap", "max_retry_after"):
            if not getattr(self, name) >= 0:
                raise TTSInvalidOptionError(name, getattr(self, name), "a number of seconds >= 0")
        if not self.factor >= 1:
            raise TTSInvalidOptionError("factor", self.factor, "a number >= 1")
        if not 0 <= self.floor <= 1:
            raise TTSInvalidOptionError("floor", self.floor, "a fraction of the ceiling in [0, 1]")

    def ceiling(self, attempt: int) -> float:
        """The largest delay of ``attempt`` (1 for the first retry)."""
        return min(self.cap, self.base * self.factor ** max(0, attempt - 1))

    def delay(
        self,
        attempt: int,
        retry_after: float | None = None,
        *,
        rand: Callable[[], float] = random.random,
    ) -> float:
        top = self.ceiling(attempt)
        delay = top * (self.floor + (1.0 - self.floor) * rand())
        if retry_after is not None:
            delay = max(delay, min(max(0.0, retry_after), self.max_retry_after))
        return delay


__all__ = ["Backoff"]
