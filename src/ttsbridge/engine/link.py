"""What an :class:`~ttsbridge.engine.turn.EngineTurn` runs on: a :class:`Link` per attempt (a connection as
the turn sees it: an engine :class:`~ttsbridge.engine.connection.Connection` is one), handed out by the
provider's :class:`Dialer` (:mod:`ttsbridge.engine.dialers`: a pool of shared connections, or a warm standby
and a fresh connection per attempt)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ttsbridge.engine.events import TurnEvent
from ttsbridge.engine.protocol import TurnProtocol

__all__ = ["Dialer", "Link"]


class Link(Protocol):
    """One attempt's connection, as the turn sees it (an :class:`~.connection.Connection` is one)."""

    @property
    def protocol(self) -> TurnProtocol: ...

    def now(self) -> float: ...

    def attach(self, turn_id: str, sink: Callable[[TurnEvent], None]) -> None: ...

    def detach(self, turn_id: str) -> None: ...

    async def flush(self, timeout: float | None = None) -> None:
        """Dispatch the command's events and write its frames (raises when the connection is lost)."""


class Dialer(Protocol):
    """What a provider gives its turns: a link for an attempt, and what to do once an attempt is over."""

    async def dial(
        self, turn_id: str, request: Any, *, retry: bool, timeout: float | None = None
    ) -> tuple[Link, bool]:
        """A link for the attempt ``turn_id`` opened with ``request``, and whether it was already open (no
        handshake paid for it). ``timeout``: the turn's own, which bounds a connect made for it (None: the
        connection's ``connect_timeout``)."""

    def hang_up(self, link: Link, end: TurnEvent) -> None:
        """The attempt on ``link`` is over with ``end`` (its :class:`~.events.TurnDone`, or its
        :class:`~.events.TurnFailed`, which carries the retry if there is one)."""
