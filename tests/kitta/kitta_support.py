"""What the Kitta tests ask of a provider's connections (the engine's, through its standby dialer)."""

from __future__ import annotations

from typing import Any

#: Bound on waiting for a session's ``ready``.
READY_WAIT = 10.0


async def session_ready(link: Any) -> None:
    """Until the server said ``ready`` on ``link`` (or it closed); bounded."""
    assert await link.wait_until(lambda: link.protocol.is_ready, READY_WAIT) or link.closed


def live(provider: Any) -> list[Any]:
    """The provider's connections not finished yet (closed, socket gone); after ``aclose()``, those of the
    dialer it last used on this loop."""
    return [c for c in list(provider.dialer._connections) if not c.finished]
