"""Audio pacing shared by the emulator's routes: send audio at a multiple of real time."""

from __future__ import annotations

import asyncio

__all__ = ["Pacer"]


class Pacer:
    """A send clock: :meth:`pace` waits until the next piece is due, then books its duration.

    The clock never lags behind now (a slow consumer does not earn a burst later)."""

    def __init__(self) -> None:
        self.clock = 0.0

    async def pace(self, seconds: float, rate: float) -> None:
        """Wait for a piece of ``seconds`` of audio at ``rate`` x real time; ``rate <= 0`` does not pace."""
        if rate <= 0:
            return
        now = asyncio.get_running_loop().time()
        if self.clock > now:
            await asyncio.sleep(self.clock - now)
        else:
            self.clock = now
        self.clock += seconds / rate
