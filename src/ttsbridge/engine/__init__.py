"""The turn engine shared by both providers (issue 10): one sans-I/O contract, one asyncio connection loop.

- :mod:`.events`     the provider-neutral event vocabulary
- :mod:`.protocol`   :class:`TurnProtocol`, the sans-I/O contract each provider implements
- :mod:`.settings`   :class:`ConnectionSettings`, the one set of connection knobs
- :mod:`.connection` :class:`Connection`, the one connection (read -> protocol -> dispatch -> write), composed
                     of :mod:`.socket` (websockets' sans-I/O client), :mod:`.inbox`, :mod:`.keepalive` and
                     :mod:`.writer`
- :mod:`.turn`       :class:`~.turn.EngineTurn`, the one I/O turn; :mod:`.stream` its delivery queue
- :mod:`.pool`       :class:`KeyedPool`, connection pooling (shared per key, or exclusive standbys)
- :mod:`.dialers`    :class:`~.dialers.SharedDialer`, :class:`~.dialers.StandbyDialer`: how turns get connections
- :mod:`.backoff`    :class:`Backoff`, exponential backoff with full jitter
- :mod:`.shared`     :class:`~.shared.LoopShare`: one dialer per settings per event loop, shared by instances
- :mod:`.transport`  TCP, the proxy (:mod:`.proxy`: the environment's rules) and TLS (:mod:`.tls`)

See docs/architecture.md, "engine".
"""

from __future__ import annotations

from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, RetryPlan, TurnDone, TurnFailed
from ttsbridge.engine.protocol import ConnectRequest, TurnProtocol, describe_close
from ttsbridge.engine.settings import ConnectionSettings

__all__ = [
    "AudioReceived",
    "Backoff",
    "ConnectRequest",
    "ConnectionFailed",
    "ConnectionSettings",
    "Event",
    "RetryPlan",
    "TurnDone",
    "TurnFailed",
    "TurnProtocol",
    "describe_close",
]
