"""The one set of connection knobs: :class:`ConnectionSettings`, frozen, validated once, derived with
:meth:`ConnectionSettings.replace`.

Every default lives here, once. A provider that needs another value states it once, as its own settings
derived from these (``nineninesix/catalog.py`` ``SETTINGS``, ``kitta/catalog.py`` ``SETTINGS``; each provider's
docs page lists them), and a caller changes a knob by name (``provider(..., ping_interval=5.0)`` is
``SETTINGS.replace(ping_interval=5.0)``). The engine reads nothing else: the socket, the inbox, the keepalive,
the write path and the pool all take their knobs from one :class:`ConnectionSettings`.
"""

from __future__ import annotations

import dataclasses
import math
import ssl as ssl_module
from dataclasses import dataclass, field
from typing import Any

from ttsbridge.engine.proxy import ProxySetting, check_proxy
from ttsbridge.errors import TTSInvalidOptionError

__all__ = ["ConnectionSettings"]


def _seconds(name: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    ok = (
        not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0 and math.isfinite(value)
    )
    if not ok:
        allowed = "a number of seconds > 0, or None (off)" if optional else "a number of seconds > 0"
        raise TTSInvalidOptionError(name, value, allowed)


@dataclass(frozen=True)
class ConnectionSettings:
    """How one WebSocket connection of the engine is opened, kept alive, written and retired.

    Attributes:
        connect_timeout: bound on opening a connection: DNS, TCP, the proxy, TLS and the HTTP upgrade, all of
            it. A turn's own timeout (``open_turn(timeout=...)``, LiveKit's ``APIConnectOptions.timeout``)
            replaces it for the connection dialled for that turn.
        close_timeout: bound on the closing handshake; the transport is aborted after it.
        write_timeout: bound on writing frames queued from a callback (a received frame, the timer) when the
            transport's buffer is full.
        ping_interval: an idle connection (the server owes nothing) silent this long gets a keepalive ping;
            None: no keepalive.
        ping_after_silence: a connection the server owes something that has been silent this long gets a
            ping, and so does a request to a connection silent this long; None: that check off.
        pong_timeout: nothing at all read within this long after a ping: the connection is dead.
        max_size: the largest message accepted (bytes); a larger one fails the connection with 1009.
        max_idle: a pooled connection with no turn, unused this long, is replaced before the next turn (below a
            server's idle close); None: never.
        max_age: a pooled connection with no turn, open this long, is replaced (a warm standby below the
            server's idle and authentication timeouts); None: never.
        proxy: a proxy URL (``http://``, ``https://``; ``socks5h://`` and kin need ``python-socks``),
            ``True`` to read it from the environment (``WSS_PROXY``, ``HTTPS_PROXY``, ``NO_PROXY``...:
            :mod:`ttsbridge.engine.proxy`), ``None`` (or ``False``) for none. The HTTP calls of a provider go
            through the same proxy.
        ssl: the TLS context for ``wss://`` (and a provider's own HTTP session); None: the shared verifying
            context of :mod:`ttsbridge.engine.tls` (the system store, ``SSL_CERT_FILE``, certifi), built off
            the event loop.
    """

    connect_timeout: float = 10.0
    close_timeout: float = 2.0
    write_timeout: float = 2.0
    ping_interval: float | None = 20.0
    ping_after_silence: float | None = 1.0
    pong_timeout: float = 1.5
    max_size: int = 8 * 2**20
    max_idle: float | None = 60.0
    max_age: float | None = None
    proxy: ProxySetting = field(default=True, repr=False)  # (a proxy URL may hold credentials)
    ssl: ssl_module.SSLContext | None = None

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "close_timeout", "write_timeout", "pong_timeout"):
            _seconds(name, getattr(self, name))
        for name in ("ping_interval", "ping_after_silence", "max_idle", "max_age"):
            _seconds(name, getattr(self, name), optional=True)
        size = self.max_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
            raise TTSInvalidOptionError("max_size", size, "an int of bytes >= 1024")
        object.__setattr__(self, "proxy", check_proxy(self.proxy))  # (False is None)
        if self.ssl is not None and not isinstance(self.ssl, ssl_module.SSLContext):
            raise TTSInvalidOptionError(
                "ssl", self.ssl, "an ssl.SSLContext, or None (the shared verifying one)"
            )

    @classmethod
    def names(cls) -> frozenset[str]:
        """The knobs, by name (what :meth:`replace` accepts)."""
        return frozenset(f.name for f in dataclasses.fields(cls))

    def replace(self, **changes: Any) -> ConnectionSettings:
        """A copy with ``changes`` (validated); an unknown name is a :class:`TTSInvalidOptionError`."""
        unknown = sorted(set(changes) - self.names())
        if unknown:
            raise TTSInvalidOptionError(unknown[0], changes[unknown[0]], f"one of {sorted(self.names())}")
        return dataclasses.replace(self, **changes) if changes else self

    def split(self, kwargs: dict[str, Any]) -> ConnectionSettings:
        """These settings with the knobs named in ``kwargs`` replaced; those keys are taken out of ``kwargs``
        (what is left is the caller's own)."""
        return self.replace(**{name: kwargs.pop(name) for name in list(kwargs) if name in self.names()})
