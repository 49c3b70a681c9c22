"""The liveness check of a :class:`~ttsbridge.engine.connection.Connection` (docs/reliability.md, "Quiet networks").

A network path can die without closing. The connection's one timer (here: it follows
``protocol.next_deadline()`` and this check) sends a WebSocket ping (from the loop: no task) when the
connection has been silent ``ping_after_silence`` while the protocol says the server owes something
(``awaiting_since()``), or ``ping_interval`` while idle; a write to a connection silent that long carries one,
and a turn's timeout sends one at once (:meth:`LivenessMixin.condemn`). Anything read within ``pong_timeout``
proves the connection alive; nothing, and it is dead (``protocol.connection_silent``, the transport aborted).
A condemned connection, or one whose ping is unanswered for a third of ``pong_timeout``, is
:attr:`~LivenessMixin.suspect`: the pool hands it to no new turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import TYPE_CHECKING

from websockets.asyncio.client import ClientConnection
from websockets.protocol import State

from ttsbridge.engine.events import Event
from ttsbridge.engine.protocol import TurnProtocol
from ttsbridge.engine.socket import Socket
from ttsbridge.errors import TTSInvalidOptionError

logger = logging.getLogger("ttsbridge.engine")


#: Liveness defaults (docs/reliability.md, "Quiet networks"): a connection the server owes something and that
#: has been silent this long gets a WebSocket ping (so does a turn's first request to a connection silent
#: this long) ...
PING_AFTER_SILENCE = 1.0
#: ... and is dead when nothing at all (pong, audio, any frame) arrives within this bound after the ping.
PONG_TIMEOUT = 1.5


def check_liveness_knobs(*, ping_interval: object, ping_after_silence: object) -> None:
    """The liveness knobs a client accepts: seconds > 0, or None (that check off)."""
    for name, val in (("ping_interval", ping_interval), ("ping_after_silence", ping_after_silence)):
        if val is None:
            continue
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not val > 0:
            raise TTSInvalidOptionError(name, val, "a number of seconds > 0, or None (off)")


class LivenessMixin:
    """The deadline timer and the liveness check of :class:`~ttsbridge.engine.connection.Connection`
    (which sets these attributes and provides the methods declared below)."""

    protocol: TurnProtocol
    ws: ClientConnection | None
    name: str
    ping_interval: float | None
    ping_after_silence: float | None
    pong_timeout: float
    last_read: float
    latency: float | None
    _loop: asyncio.AbstractEventLoop
    _sock: Socket | None
    _ping_at: float | None
    _condemned: bool
    _ping_data: bytes
    _ping_sent: float
    _timer: asyncio.TimerHandle | None
    _timer_at: float

    if TYPE_CHECKING:

        def _dispatch(self, events: list[Event]) -> None: ...
        def _after_input(self) -> None: ...
        def _write_soon(self) -> None: ...
        def _start_close(self) -> asyncio.Task[None]: ...

    @property
    def checking(self) -> bool:
        """A liveness ping is out and nothing was read since (answered or not, it is not known yet)."""
        return self._ping_at is not None

    @property
    def suspect(self) -> bool:
        """No new turn should be routed here until the connection is proven alive (anything arrives) or found
        dead (nothing within ``pong_timeout``): a turn timed out on it (:meth:`condemn`), or a ping has been
        out unanswered for a third of ``pong_timeout``. (A live connection answers within a round trip, so a
        routine check, a request's or a keepalive's, turns no new turn away: pooled connections shared by
        several streams are not replaced for it.)"""
        at = self._ping_at
        if at is None:
            return False
        return self._condemned or self._loop.time() - at >= self.pong_timeout / 3

    def pong(self, data: bytes) -> None:
        """A pong arrived (the socket's control frames): the round trip of our last ping, if it answers it."""
        if data == self._ping_data and self._ping_data:
            self.latency = self.last_read - self._ping_sent
            self._ping_data = b""
            logger.debug("%s: pong in %.1f ms", self.name, self.latency * 1000)

    # --- the deadline timer -------------------------------------------------------------------------------

    def _arm(self) -> None:
        """Follow ``protocol.next_deadline()`` and the liveness check: a timer already set no later than the
        earlier of them stays (it re-arms)."""
        deadline = self.protocol.next_deadline()
        check = self._check_at()
        if check is not None and (deadline is None or check < deadline):
            deadline = check
        if deadline is None or (self._timer is not None and self._timer_at <= deadline):
            return
        self._cancel_timer()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._on_timer)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_timer(self) -> None:
        self._timer = None
        if self.protocol.closed:
            return
        now = self._loop.time()
        proto = self.protocol
        timeouts = proto.timeouts
        proto.tick(now)
        if proto.timeouts != timeouts:
            self.condemn()  # audio was owed and did not come: is the connection still there?
        self._liveness(now)
        self._after_input()
        if self.protocol.has_data_to_send():
            self._write_soon()

    # --- liveness (docs/reliability.md, "Quiet networks") ---------------------------------------------------

    def _check_at(self) -> float | None:
        """When the liveness check needs the timer next: the answer to a ping out is due; or the server owes
        something (``protocol.awaiting_since()``) and the connection has been silent ``ping_after_silence``;
        or it owes nothing and has been silent ``ping_interval`` (keepalive). Silence is measured from the
        last read of any kind, so a server that streams (or answers pings) is never pinged more than once
        per ``ping_after_silence``."""
        if self.ws is None or self.protocol.closed:
            return None
        if self._ping_at is not None:
            return self._ping_at + self.pong_timeout
        owed = self.protocol.awaiting_since()
        if owed is not None:
            after = self.ping_after_silence
            return None if after is None else max(owed, self.last_read) + after
        interval = self.ping_interval
        return None if interval is None else self.last_read + interval

    def _liveness(self, now: float) -> None:
        if self._ping_at is not None:
            if now >= self._ping_at + self.pong_timeout:
                self._dead(now)
            return
        due = self._check_at()
        if due is not None and now >= due:
            self._ping(now)

    def condemn(self) -> None:
        """A turn timed out on this connection: no new turn goes here (:attr:`suspect`) until a ping proves it
        alive; no answer within ``pong_timeout`` and it is dead (every turn on it ends at once)."""
        if self.protocol.closed or self.ws is None:
            return
        self._condemned = True
        if self._ping_at is None:
            self._ping(self._loop.time())
            self._arm()

    def _ping(self, now: float) -> None:
        """Send a ping from the loop (no task, no lock: a control frame may go between any two frames)."""
        ws = self.ws
        if ws is None or ws.state is not State.OPEN:
            return
        self._ping_at = self._ping_sent = now
        self._ping_data = os.urandom(4)
        with contextlib.suppress(Exception):  # (the socket is going: the protocol hears of it anyway)
            ws.protocol.send_ping(self._ping_data)
            ws.send_data()

    def _dead(self, now: float) -> None:
        """No answer to the ping: the path is dead. Every turn ends now; the transport is aborted (a close
        handshake cannot complete over a dead path)."""
        silent = now - self.last_read
        detail = (
            f"connection silent for {silent:.1f}s: no answer to a ping within {self.pong_timeout:g}s "
            "(the network path is dead)"
        )
        logger.warning("%s: %s", self.name, detail)
        self._ping_at = None
        self._condemned = False
        self.protocol.connection_silent(detail, now)
        self._dispatch(self.protocol.events_received())
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(Exception):
                sock.transport.abort()
        self._start_close()


__all__ = ["PING_AFTER_SILENCE", "PONG_TIMEOUT", "LivenessMixin", "check_liveness_knobs"]
