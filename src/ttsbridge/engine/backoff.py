"""The one backoff: exponential with full jitter (AWS "Exponential Backoff And Jitter"), honouring a server's
``retry_after``. Pure: the caller sleeps (or sets a deadline) for the delay it returns."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from ttsbridge.errors import TTSInvalidOptionError


@dataclass(frozen=True)
class Backoff:
    """``delay(attempt)`` is uniform in ``[0, min(cap, base * factor ** (attempt - 1))]``.

    A ``retry_after`` the server gave wins (bounded by ``cap``): waiting less would only earn the same error.
    """

    base: float = 0.2
    factor: float = 2.0
    cap: float = 10.0

    def __post_init__(self) -> None:
        for name in ("base", "cap"):
            if not getattr(self, name) >= 0:
                raise TTSInvalidOptionError(name, getattr(self, name), "a number of seconds >= 0")
        if not self.factor >= 1:
            raise TTSInvalidOptionError("factor", self.factor, "a number >= 1")

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
        if retry_after is not None:
            return min(max(0.0, retry_after), self.cap)
        return rand() * self.ceiling(attempt)


__all__ = ["Backoff"]
