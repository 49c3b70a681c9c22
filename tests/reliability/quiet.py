"""Quiet networks: the faults of a network that fails without closing, through the fault proxy
(``loopback.FaultProxy``) between each public surface and the loopback server. Importable without pytest
(``bench/chaos.py --quiet N``).

A case runs on a fresh server, proxy and surface object: with ``warm``, a clean turn first (the pooled
connection, or Kitta's standby, is then open and idle) and the fault is applied to the open connections; else
the fault is armed for the next connection. Then the faulty turn, then the next turn, then ``aclose()``. Checks:
the faulty turn ends with audio or a typed error (a full turn when the case says it must speak: the fault lost
nothing), no stale sample; the next turn is a full clean turn (0 turns fail after the fault because of it);
nothing is left after ``aclose()`` (client tasks, server-side sockets, proxied connections).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from harness import (
    BOUND,
    CaseReport,
    Outcome,
    check_left,
    check_outcome,
    make_provider,
    turn_once,
)
from surfaces import livekit_turn, make_livekit, pipecat_turns

from loopback import Fault, FaultProxy, LoopbackServer

#: server frames before the first audio, and before the middle of a turn's audio (Nineninesix: chunk 0-3,
#: done; Kitta: authenticated, ready, audio 0-3, usage, finish)
BEFORE_AUDIO = {"nineninesix": 0, "kitta": 2}
MID_TURN = {"nineninesix": 2, "kitta": 4}

#: Liveness knobs: "fast" (the quick mode's grid: a silence is found in 1 s, well inside receive_timeout and
#: event_timeout of 5 s), "short" (the issue's short timeouts: receive_timeout / event_timeout 2.5 s, LiveKit
#: timeout 2.5 s, liveness at its defaults: the timeout fires first and condemns the connection), "defaults"
#: (the package's defaults: receive_timeout 15 s, event_timeout 20 s, ping after 1 s, pong within 1.5 s).
KNOBS: dict[str, dict[str, dict[str, Any]]] = {
    "fast": {
        "nineninesix": {"receive_timeout": 5.0, "ping_after_silence": 0.4, "pong_timeout": 0.6},
        "kitta": {"event_timeout": 5.0, "ping_after_silence": 0.4, "pong_timeout": 0.6, "ping_interval": 0.5},
    },
    "short": {"nineninesix": {"receive_timeout": 2.5}, "kitta": {"event_timeout": 2.5}},
    "defaults": {
        "nineninesix": {"receive_timeout": 15.0, "connect_timeout": 10.0, "cancel_timeout": 2.0},
        "kitta": {"event_timeout": 20.0, "connect_timeout": 10.0, "close_timeout": 2.0},
    },
}
#: LiveKit's ``APIConnectOptions.timeout`` per knob set (10 s is LiveKit's default)
LIVEKIT_TIMEOUT = {"fast": 5.0, "short": 2.5, "defaults": 10.0}
#: a stall the fast knobs must ride out: below ping_after_silence + pong_timeout (1.0 s) and below the timeouts
STALL = 0.3

Hook = Callable[[FaultProxy], Awaitable[None]]
#: the faults only the liveness check notices
SILENT = ("blackhole", "dead_idle")


@dataclass(frozen=True)
class QuietCase:
    name: str
    #: arm the proxy for the next connection (``warm`` False) ...
    arm: Callable[[str], Fault] | None = None
    #: ... or, after a warm turn, hit the open connections
    hook: Hook | None = None
    #: the faulty turn must be a full clean turn, per provider (else audio or a typed error will do)
    speaks: tuple[str, ...] = ()
    #: Kitta with its warm standby (the idle connection it has)
    standby: bool = False

    @property
    def warm(self) -> bool:
        return self.hook is not None


async def _idle_kill(proxy: FaultProxy) -> None:
    await _until_open(proxy)
    proxy.blackhole_all()


def _idle_close(code: int) -> Hook:
    async def hook(proxy: FaultProxy) -> None:
        await _until_open(proxy)
        links = [link for link in proxy.links if not link.closed]
        proxy.close_all(code, "idle timeout")
        await _until(lambda: all(link.closed for link in links))  # the close is over before the next turn

    return hook


async def _until_open(proxy: FaultProxy) -> None:
    """The idle connection is up (Nineninesix's pooled one; Kitta's standby, which reconnects after a turn)."""
    await _until(lambda: proxy.open_links >= 1)
    await asyncio.sleep(0.1)  # (the standby's authentication round trip: the connection is idle, not opening)


async def _until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not cond():  # proxy state: no event to wait on
        if loop.time() >= end:
            raise AssertionError(f"the proxy never reached the state the fault needs within {timeout} s")
        await asyncio.sleep(0.01)


CASES: dict[str, QuietCase] = {
    c.name: c
    for c in (
        QuietCase("blackhole_before_audio", arm=lambda p: Fault("blackhole", BEFORE_AUDIO[p]),
                  speaks=("nineninesix",)),
        QuietCase("blackhole_mid_turn", arm=lambda p: Fault("blackhole", MID_TURN[p])),
        QuietCase("stall_before_audio", arm=lambda p: Fault("stall", BEFORE_AUDIO[p], STALL),
                  speaks=("nineninesix", "kitta")),
        QuietCase("stall_mid_turn", arm=lambda p: Fault("stall", MID_TURN[p], STALL),
                  speaks=("nineninesix", "kitta")),
        QuietCase("sliced", arm=lambda p: Fault("slice"), speaks=("nineninesix", "kitta")),
        QuietCase("handshake_cut", arm=lambda p: Fault("cut_handshake")),
        QuietCase("cut_after_first_request", arm=lambda p: Fault("cut_after_first_message")),
        QuietCase("dead_idle", hook=_idle_kill, speaks=("nineninesix",), standby=True),
        QuietCase("idle_close_1000", hook=_idle_close(1000), speaks=("nineninesix", "kitta"), standby=True),
        QuietCase("idle_close_1001", hook=_idle_close(1001), speaks=("nineninesix", "kitta"), standby=True),
    )
}  # fmt: skip


async def run_quiet(surface: str, provider: str, case: QuietCase, knobs: str = "fast") -> CaseReport:
    """One case (module docstring); the outcomes are [warm turn,] faulty turn, next turn."""
    baseline = set(asyncio.all_tasks())
    options = KNOBS[knobs][provider]
    standby = case.standby and provider == "kitta"
    async with LoopbackServer(provider) as srv, FaultProxy(srv.port) as proxy:
        numbers = [1, 2, 3] if case.warm else [1, 2]
        faulty = 1 if case.warm else 0

        async def before_faulty() -> None:
            if case.hook is not None:
                await case.hook(proxy)
            elif case.arm is not None:
                proxy.arm(case.arm(provider))

        outs = await _turns(surface, provider, proxy.base_url, numbers, faulty, before_faulty, options,
                            standby, LIVEKIT_TIMEOUT[knobs])  # fmt: skip
        report = CaseReport(outs)
        if case.warm:
            check_outcome(report.problems, "warm turn", outs[0], full=True)
        # (with the short timeouts the deadline passes as the silence is found: the faulty turn may end typed)
        speaks = provider in case.speaks and (knobs != "short" or not case.name.startswith(SILENT))
        check_outcome(report.problems, "faulty turn", outs[faulty], full=speaks)
        check_outcome(report.problems, "next turn", outs[faulty + 1], full=True)
        await check_left(report.problems, baseline, srv)
        await _until(lambda: proxy.open_links == 0, 2.0)
        if proxy.open_links:
            report.problems.append(f"{proxy.open_links} proxied connection(s) still open after aclose")
    return report


async def _turns(
    surface: str,
    provider: str,
    base_url: str,
    numbers: list[int],
    faulty: int,
    before_faulty: Callable[[], Awaitable[None]],
    options: dict[str, Any],
    standby: bool,
    lk_timeout: float,
) -> list[Outcome]:
    if surface == "pipecat":
        return await pipecat_turns(provider, base_url, numbers, before={faulty: before_faulty},
                                   options=options, standby=standby)  # fmt: skip
    obj: Any = (
        make_livekit(provider, base_url, options, standby=standby)
        if surface == "livekit"
        else make_provider(provider, base_url, standby=standby, **options)
    )
    outs = []
    try:
        for i, n in enumerate(numbers):
            if i == faulty:
                await before_faulty()
            if surface == "livekit":
                outs.append(await livekit_turn(obj, n, timeout=lk_timeout))
            else:
                outs.append(await turn_once(obj, n))
    finally:
        await asyncio.wait_for(obj.aclose(), BOUND)
    return outs
