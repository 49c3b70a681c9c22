"""A network that dies quietly (issue 18), on the Nineninesix client: the engine's liveness check and what a
timeout does to its connection. Real sockets: the loopback server, the fault proxy between them
(``loopback.FaultProxy``)."""

from __future__ import annotations

import asyncio
from typing import Any

from websockets.asyncio.server import ServerConnection

from loopback import (
    Fault,
    FaultProxy,
    LoopbackServer,
    collect,
    nns_chunk,
    nns_done,
    nns_provider,
    nns_turn,
    send,
)
from support import wait_until
from ttsbridge.errors import TTSSilentConnectionError, TTSTimeoutError
from ttsbridge.nineninesix import NineninesixOptions, NineninesixTurnProvider, OutputFormat
from ttsbridge.nineninesix.facts import replay_deadline

API_KEY = "sk_996_liveness_test_key"
FMT = OutputFormat(sample_rate=22050)
PCM = b"\x01\x01" * 441


def client(url: str, **kw: Any) -> NineninesixTurnProvider:
    return nns_provider(url, API_KEY, **kw)  # type: ignore[no-any-return]


async def sent(c: NineninesixTurnProvider, text: str) -> Any:
    """A new context with ``text`` sent and the turn ended."""
    ctx = await nns_turn(c, FMT)
    await ctx.send(text)
    await ctx.end()
    return ctx


async def speaks(it: Any, text: str) -> None:
    """``text`` through a context or turn, ended: all its audio comes (4 chunks of the loopback server)."""
    await it.send(text)
    await it.end()
    assert len(await collect(it, timeout=5)) == 4 * 441 * 2


async def test_a_timeout_condemns_its_connection_and_the_other_turns_on_it_end_at_once() -> None:
    """Liveness by silence off: only the timeout notices. The first context's timeout sends a ping; no answer
    within pong_timeout and the connection is dead: the second context (its own timeout still 0.4 s away)
    ends at once with TTSSilentConnectionError, and the next context gets a new connection."""
    async with LoopbackServer("nineninesix") as srv, FaultProxy(srv.port) as proxy:
        c = client(proxy.base_url, receive_timeout=1.0, ping_after_silence=None, pong_timeout=0.2)
        try:
            proxy.arm(Fault("blackhole"))
            a = await sent(c, "t1 first")
            await asyncio.sleep(0.6)  # the second context's text goes later: its own timeout is 0.4 s after
            b = await sent(c, "t2 second")
            first = asyncio.ensure_future(collect(a, timeout=5))
            second = asyncio.ensure_future(collect(b, timeout=5))
            done = await asyncio.gather(first, second, return_exceptions=True)
            assert isinstance(done[0], TTSTimeoutError) and not isinstance(done[0], TTSSilentConnectionError)
            assert isinstance(done[1], TTSSilentConnectionError), done[1]
            nxt = await nns_turn(c, FMT)
            assert nxt.link is not a.link and c.dialer.opened == 2
            await speaks(nxt, "t3 third")
        finally:
            await c.aclose()


async def test_a_suspect_connection_is_not_handed_out_and_is_closed_once_its_turn_is_over() -> None:
    """A timed-out connection with a ping out is not routed to: the pool opens a fresh one and retires the
    old one, which closes itself once the turn still reading from it is over (here: found dead)."""
    async with LoopbackServer("nineninesix") as srv, FaultProxy(srv.port) as proxy:
        c = client(proxy.base_url, receive_timeout=0.3, ping_after_silence=None, pong_timeout=1.0)
        try:
            proxy.arm(Fault("blackhole"))
            a = await sent(c, "t1 first")
            await wait_until(lambda: a.link.suspect, 5)  # the timeout fired and pinged
            b = await nns_turn(c, FMT)
            assert b.link is not a.link and a.link.retired
            await speaks(b, "t2 second")
            await wait_until(lambda: a.link.socket is not None and a.link.closed and proxy.open_links == 1, 5)
        finally:
            await c.aclose()
        await wait_until(lambda: proxy.open_links == 0, 5)


async def test_a_slow_server_answers_pings_and_its_turn_completes() -> None:
    """A server that renders slowly (1.2 s before its first audio, with liveness after 0.2 s of silence and a
    0.3 s pong bound) answers the pings: not a dead connection, the turn is whole, one connection."""

    async def slow(ws: ServerConnection, msg: dict[str, Any]) -> None:
        if msg.get("continue") is False:
            await asyncio.sleep(1.2)  # the server's own slowness (the fault under test), not synchronisation
            for _ in range(4):
                await send(ws, nns_chunk(msg["context_id"], PCM))
            await send(ws, nns_done(msg["context_id"]))

    async with LoopbackServer("nineninesix", script=slow) as srv:
        c = client(srv.base_url, ping_after_silence=0.2, pong_timeout=0.3)
        try:
            ctx = await nns_turn(c, FMT)
            await ctx.send("t1 slow")
            await ctx.end()
            assert len(await collect(ctx, timeout=5)) == 4 * len(PCM)
            conn = c.dialer.connection(FMT)
            assert conn is ctx.link and conn.usable() and conn.keepalive.latency is not None
            assert c.dialer.opened == 1
        finally:
            await c.aclose()


async def test_a_turn_whose_connection_went_silent_before_audio_is_replayed_once_with_a_new_context_id() -> (
    None
):
    async with LoopbackServer("nineninesix") as srv, FaultProxy(srv.port) as proxy:
        opts = NineninesixOptions(voice="tone", sample_rate=22050)
        prov = NineninesixTurnProvider(
            API_KEY, base_url=proxy.base_url, options=opts, ping_after_silence=0.2, pong_timeout=0.3
        )
        try:
            proxy.arm(Fault("blackhole"), Fault("blackhole"))  # the replay's connection goes silent too
            turn = await prov.open_turn(sample_rate=22050)
            first_id = turn.id
            await turn.send("t1 hello")
            await turn.end()
            try:
                await collect(turn, timeout=5)
            except TTSSilentConnectionError:
                pass
            else:
                raise AssertionError("a second silence is not replayed")
            assert turn.retries == 1 and turn.id != first_id and proxy.connections == 2
            assert [m["context_id"] for m in srv.messages] == []  # (blackholed: the server heard nothing)
            await speaks(await prov.open_turn(sample_rate=22050), "t2 hello")
        finally:
            await prov.aclose()


async def test_a_replay_keeps_the_first_attempts_deadline() -> None:
    """The first connection goes silent (found dead at ~0.5 s); the replay's server is alive (it answers
    pings) but never renders: the replay fails at the first attempt's deadline, not a fresh receive_timeout."""

    async def mute(ws: ServerConnection, msg: dict[str, Any]) -> None:
        pass  # never renders anything (pings are answered by websockets)

    async with LoopbackServer("nineninesix", script=mute) as srv, FaultProxy(srv.port) as proxy:
        opts = NineninesixOptions(voice="tone", sample_rate=22050)
        prov = NineninesixTurnProvider(
            API_KEY, base_url=proxy.base_url, options=opts, receive_timeout=1.2, ping_after_silence=0.2,
            pong_timeout=0.3,
        )  # fmt: skip
        try:
            proxy.arm(Fault("blackhole"))
            turn = await prov.open_turn(sample_rate=22050)
            first = turn.facts
            await turn.send("t1 hello")
            await turn.end()
            try:
                await collect(turn, timeout=5)
            except TTSTimeoutError as exc:
                err: BaseException = exc
            assert turn.retries == 1 and not isinstance(err, TTSSilentConnectionError), err
            replay = turn.facts
            assert replay.not_after == replay_deadline(first, 1.2) < replay.last_sent + 1.2
        finally:
            await prov.aclose()


async def test_a_routine_check_turns_no_new_turn_away_from_a_shared_connection() -> None:
    """A request to a connection idle for a while carries a ping; a turn opened while that ping is out (a
    second stream on the shared connection) still goes to it: the pool does not replace a connection for a
    check that a live one answers within a round trip."""
    async with LoopbackServer("nineninesix") as srv:
        c = client(srv.base_url, ping_after_silence=0.2, pong_timeout=1.5)
        try:
            await c.dialer.prewarm(FMT)
            conn = c.dialer.connection(FMT)
            assert conn is not None
            await wait_until(lambda: conn.now() - conn.keepalive.last_read >= 0.25, 5)  # idle a while
            a = await sent(c, "t1 first")
            assert conn.keepalive.checking and not conn.suspect  # the request's ping is out
            b = await sent(c, "t2 second")
            assert b.link is conn and a.link is conn and c.dialer.opened == 1
            for ctx in (a, b):
                assert len(await collect(ctx, timeout=5)) == 4 * 441 * 2
            assert conn.keepalive.latency is not None and conn.usable()
        finally:
            await c.aclose()
