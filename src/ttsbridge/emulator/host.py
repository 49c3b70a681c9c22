"""What the emulator's routes see of the server: :class:`EmulatorHost` (the :class:`~ttsbridge.emulator.Emulator`
is one) and :class:`Connection`. Declared here so that the routes, which ``server.py`` mounts, need not import
``server.py`` (no import cycle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ttsbridge.emulator.config import EmulatorConfig
    from ttsbridge.emulator.nineninesix.faults import FaultBook
    from ttsbridge.emulator.stats import EmulatorStats
    from ttsbridge.emulator.voices import VoiceRegistry

__all__ = ["Connection", "EmulatorHost"]


class Connection(Protocol):
    """An open socket the emulator can drop or shut down (Nineninesix and Kitta connections alike)."""

    def abort(self) -> None: ...

    async def shutdown(self, code: int = 1001, reason: str = "") -> None: ...


class EmulatorHost(Protocol):
    """The shared state and plumbing of one emulator, as its Nineninesix and Kitta routes use it."""

    config: EmulatorConfig
    stats: EmulatorStats
    faults: FaultBook
    voices: VoiceRegistry
    stopping: bool

    def register_connection(self, conn: Connection) -> None: ...

    def unregister_connection(self, conn: Connection) -> None: ...

    def next_connection_number(self) -> int: ...

    def acquire_slot(self) -> bool: ...

    def release_slot(self) -> None: ...

    def charge(self, chars: int) -> bool: ...

    def refund(self, chars: int) -> None: ...

    def notify(self) -> None: ...
