"""The Kitta route's state shared by every session of one emulator: :class:`Endpoint` (its handler, which
makes the sessions, is in :mod:`.routes`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ttsbridge.emulator.kitta.config import KittaConfig
from ttsbridge.emulator.kitta.faults import KittaFault
from ttsbridge.emulator.kitta.stats import KittaStats

if TYPE_CHECKING:
    from ttsbridge.emulator.host import EmulatorHost

__all__ = ["Endpoint"]


class Endpoint:
    """Route state shared by every session of one emulator."""

    def __init__(self, emulator: EmulatorHost) -> None:
        self.emulator = emulator
        self.used_request_ids: dict[str, set[str]] = {}
        self.marker_hits: dict[str, int] = {}
        self.active = 0

    @property
    def config(self) -> KittaConfig:
        return self.emulator.config.kitta

    @property
    def stats(self) -> KittaStats:
        return self.emulator.stats.kitta

    def notify(self) -> None:
        """Wake the emulator's ``wait_until`` waiters (stats changed)."""
        self.emulator.notify()

    def fault_fires(self, fault: KittaFault, key: str) -> bool:
        if fault.times is None:
            return True
        hits = self.marker_hits.get(key, 0)
        if hits >= fault.times:
            return False
        self.marker_hits[key] = hits + 1
        return True
