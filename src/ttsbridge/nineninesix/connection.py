"""One Nineninesix WebSocket: the engine's :class:`~ttsbridge.engine.connection.Connection` driving one
:class:`~ttsbridge.nineninesix.protocol.NineninesixProtocol` (one output format, many contexts), pooled by the
client by format. It is the :class:`~ttsbridge.engine.turn.Link` of every turn attempt on it."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ttsbridge.engine import ConnectionFailed, Event
from ttsbridge.engine.connection import PING_AFTER_SILENCE, PONG_TIMEOUT, Connection
from ttsbridge.errors import TTSConnectionError
from ttsbridge.nineninesix.protocol import NineninesixProtocol

logger = logging.getLogger("ttsbridge.nineninesix")

#: Bound on a closing handshake: after it websockets aborts the TCP connection, so no socket lingers CLOSING.
CLOSE_TIMEOUT = 2.0

__all__ = ["CLOSE_TIMEOUT", "ConnectSettings", "NineninesixConnection"]


@dataclass(frozen=True)
class ConnectSettings:
    """The client's connection knobs (see :class:`~ttsbridge.nineninesix.client.NineninesixClient`)."""

    connect_timeout: float = 10.0
    cancel_timeout: float = 2.0
    max_idle: float = 60.0
    ping_interval: float | None = 20.0
    ping_after_silence: float | None = PING_AFTER_SILENCE
    pong_timeout: float = PONG_TIMEOUT
    #: ``True``: from the environment (``WSS_PROXY`` / ``HTTPS_PROXY`` / ``NO_PROXY``, websockets' own
    #: reading); ``None``: direct; a URL: that proxy.
    proxy: str | bool | None = True
    #: The TLS context for ``wss://`` (None: the shared verifying one, engine/tls.py).
    ssl: ssl.SSLContext | None = None

    def connect_options(self) -> dict[str, Any]:
        """Extra keyword arguments for ``websockets.connect``."""
        options: dict[str, Any] = {} if self.proxy is True else {"proxy": self.proxy or None}
        if self.ssl is not None:
            options["ssl"] = self.ssl
        return options


class NineninesixConnection(Connection):
    """One WebSocket, one output format, many contexts. ``on_failed`` is told when it fails (it leaves the
    pool)."""

    def __init__(
        self,
        protocol: NineninesixProtocol,
        settings: ConnectSettings,
        serial: int,
        on_failed: Callable[[NineninesixConnection], None],
    ) -> None:
        super().__init__(
            protocol,
            on_event=self._on_connection_event,
            connect_timeout=settings.connect_timeout,
            close_timeout=CLOSE_TIMEOUT,
            write_timeout=settings.cancel_timeout,
            ping_interval=settings.ping_interval,
            ping_after_silence=settings.ping_after_silence,
            pong_timeout=settings.pong_timeout,
            name=f"nineninesix-{serial}",
            connect_options=settings.connect_options(),
        )
        self.protocol: NineninesixProtocol = protocol
        self.output_format = protocol.output_format
        self.serial = serial
        self.max_idle = settings.max_idle
        self._on_failed = on_failed

    def __repr__(self) -> str:
        fmt = self.output_format
        return f"NineninesixConnection(#{self.serial}, {fmt.encoding}@{fmt.sample_rate})"

    @property
    def contexts(self) -> dict[str, object]:
        """The contexts on this connection someone still reads (their sinks, by id)."""
        return self.sinks  # type: ignore[return-value]

    def usable(self) -> bool:
        """Open, not retired, and not suspect (condemned by a timeout, or a liveness ping unanswered a while)."""
        return self.writable() and not self.suspect and not self.retired

    def expired(self) -> bool:
        """Idle for longer than ``max_idle`` with no context on it: replaced before a server idle close."""
        return not self.closed and not self.sinks and self.idle_for() > self.max_idle

    def _on_connection_event(self, ev: Event) -> None:
        # The ends of contexts their owner let go (a late cancel acknowledgement) need nothing: the protocol
        # dropped them already. A failed connection leaves the pool.
        if not isinstance(ev, ConnectionFailed):
            return
        if self.sinks or not isinstance(ev.error, TTSConnectionError):
            logger.warning("nineninesix: connection #%d failed: %s", self.serial, ev.error)
        else:
            logger.debug("nineninesix: idle connection #%d closed: %s", self.serial, ev.error)
        self._on_failed(self)
