"""A protocol error fails the turn the moment the bad frame is read, not once the close handshake is over.

The loopback server sends a frame that is not MessagePack, keeps sending (more than websockets' receive queue
holds), then stops reading, so the client's close cannot complete until the test lets it. The client's
``close_timeout`` (6 s) is twice the turn's bound (3 s): a client that reports the error only after its close
finished (or timed out) runs into the bound and the turn counts as a hang.
"""

from __future__ import annotations

import asyncio

from harness import make_provider, turn_once

from loopback import LoopbackServer, Mutation


async def test_kitta_protocol_error_fails_the_turn_before_the_close_completes() -> None:
    async with LoopbackServer("kitta") as srv:
        prov = make_provider("kitta", srv.base_url, close_timeout=6.0)
        try:
            srv.arm(Mutation(3, "bad_then_hold"))
            first = await turn_once(prov, 1, bound=3.0)
            srv.release.set()
            assert first.kind == "typed", first
            second = await turn_once(prov, 2)
            assert second.kind == "audio" and second.stale == 0, second
        finally:
            srv.release.set()
            await asyncio.wait_for(prov.aclose(), 10.0)
