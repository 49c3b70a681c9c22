"""The keepalive of a :class:`~ttsbridge.engine.connection.Connection` (docs/reliability.md, "Quiet networks").

A network path can die without closing. The connection's one timer asks :meth:`Keepalive.check_at` when the
check needs it next and calls :meth:`Keepalive.due` then: a connection silent ``ping_after_silence`` while the
protocol says the server owes something (``awaiting_since()``), or ``ping_interval`` while idle, gets a
WebSocket ping (from the loop: no task); a write to a connection silent that long carries one
(:meth:`Keepalive.before_write`), and a turn's timeout sends one at once (:meth:`Keepalive.condemn`). Anything
read within ``pong_timeout`` proves the connection alive (:meth:`Keepalive.heard`); nothing, and it is dead
(``on_dead``). A condemned connection, or one whose ping is unanswered for a third of ``pong_timeout``, is
:attr:`Keepalive.suspect`: the pool hands it to no new turn.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.settings import ConnectionSettings

__all__ = ["Keepalive"]

logger = logging.getLogger("ttsbridge.engine")


class Keepalive:
    """Ping, pong, suspect, condemn: the liveness state of one connection.

    ``send_ping(data)`` writes a ping (False: the socket is not open); ``on_dead(detail, now)`` is told once a
    ping went unanswered ``pong_timeout``."""

    def __init__(
        self,
        settings: ConnectionSettings,
        protocol: TurnProtocol,
        send_ping: Callable[[bytes], bool],
        on_dead: Callable[[str, float], None],
        clock: Callable[[], float],
        *,
        name: str = "",
    ) -> None:
        self.ping_interval = settings.ping_interval
        self.ping_after_silence = settings.ping_after_silence
        self.pong_timeout = settings.pong_timeout
        self._protocol = protocol
        self._send_ping = send_ping
        self._on_dead = on_dead
        self._clock = clock
        self.name = name
        #: When the socket last read anything (a data frame, a pong, a close...): the proof of life.
        self.last_read = clock()
        #: Round trip of the last answered ping (seconds), None before one was.
        self.latency: float | None = None
        self._ping_at: float | None = None  # a ping is out since then, nothing read since
        self._condemned = False  # that ping was sent because a turn timed out
        self._ping_data = b""
        self._ping_sent = 0.0

    @property
    def checking(self) -> bool:
        """A ping is out and nothing was read since (answered or not, it is not known yet)."""
        return self._ping_at is not None

    @property
    def suspect(self) -> bool:
        """No new turn should go here until the connection is proven alive (anything arrives) or found dead: a
        turn timed out on it (:meth:`condemn`), or a ping has been out unanswered for a third of
        ``pong_timeout``. (A live connection answers within a round trip, so a routine check turns no new turn
        away: shared connections are not replaced for it.)"""
        at = self._ping_at
        if at is None:
            return False
        return self._condemned or self._clock() - at >= self.pong_timeout / 3

    def heard(self) -> None:
        """The socket read something: the connection is alive (a ping out is answered)."""
        self.last_read = self._clock()
        self._ping_at = None
        self._condemned = False

    def pong(self, data: bytes) -> None:
        """A pong arrived: the round trip of our last ping, if it answers it."""
        if data == self._ping_data and data:
            self.latency = self.last_read - self._ping_sent
            self._ping_data = b""
            logger.debug("%s: pong in %.1f ms", self.name, self.latency * 1000)

    def check_at(self) -> float | None:
        """When the check needs the timer next: the answer to a ping out is due; or the server owes something
        (``awaiting_since()``) and the connection has been silent ``ping_after_silence``; or it owes nothing
        and has been silent ``ping_interval``. Silence counts from the last read of any kind, so a server that
        streams (or answers pings) is never pinged more than once per ``ping_after_silence``."""
        if self._ping_at is not None:
            return self._ping_at + self.pong_timeout
        owed = self._protocol.awaiting_since()
        if owed is not None:
            after = self.ping_after_silence
            return None if after is None else max(owed, self.last_read) + after
        interval = self.ping_interval
        return None if interval is None else self.last_read + interval

    def due(self, now: float) -> None:
        """The timer fired: ping a connection silent too long, or find it dead."""
        if self._ping_at is not None:
            if now >= self._ping_at + self.pong_timeout:
                self._dead(now)
            return
        at = self.check_at()
        if at is not None and now >= at:
            self._ping(now)

    def before_write(self, now: float) -> None:
        """A request to a connection that has been silent a while (an idle pooled one, a warm standby): the
        check goes out with it, so a dead path is found before the request's deadline."""
        after = self.ping_after_silence
        if after is not None and self._ping_at is None and now - self.last_read >= after:
            self._ping(now)

    def condemn(self, now: float) -> bool:
        """A turn timed out on this connection: no new turn goes here (:meth:`suspect`) until a ping proves it
        alive; no answer within ``pong_timeout`` and it is dead. True when a ping went out for it."""
        self._condemned = True
        if self._ping_at is None:
            self._ping(now)
            return True
        return False

    def _ping(self, now: float) -> None:
        data = os.urandom(4)
        if self._send_ping(data):
            self._ping_at = self._ping_sent = now
            self._ping_data = data

    def _dead(self, now: float) -> None:
        silent = now - self.last_read
        detail = (
            f"connection silent for {silent:.1f}s: no answer to a ping within {self.pong_timeout:g}s "
            "(the network path is dead)"
        )
        logger.warning("%s: %s", self.name, detail)
        self._ping_at = None
        self._condemned = False
        self._on_dead(detail, now)
