"""The turn engine shared by both providers (issue 10): one sans-I/O contract, one asyncio connection loop.

- :mod:`.events`     the provider-neutral event vocabulary
- :mod:`.protocol`   :class:`TurnProtocol`, the sans-I/O contract each provider implements
- :mod:`.connection` :class:`Connection`, the one asyncio loop (read -> protocol -> dispatch -> write)
- :mod:`.stream`     :class:`TurnStream`, the consumer side of one turn (a delivery queue)
- :mod:`.pool`       :class:`KeyedPool`, connection pooling (shared per key, or exclusive standbys)
- :mod:`.backoff`    :class:`Backoff`, exponential backoff with full jitter

See docs/architecture.md, "engine".
"""

from __future__ import annotations

from ttsbridge.engine.backoff import Backoff
from ttsbridge.engine.events import AudioReceived, ConnectionFailed, Event, TurnDone, TurnFailed
from ttsbridge.engine.protocol import ConnectRequest, TurnProtocol, describe_close

__all__ = [
    "AudioReceived",
    "Backoff",
    "ConnectRequest",
    "ConnectionFailed",
    "Event",
    "TurnDone",
    "TurnFailed",
    "TurnProtocol",
    "describe_close",
]
