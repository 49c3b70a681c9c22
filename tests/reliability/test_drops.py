"""Drop storm (quick mode): the server cuts the TCP connection (no close frame) at each protocol point, per
provider and per public surface (framework-free turns, Pipecat service, LiveKit plugin). Each faulty turn ends
with audio or a typed error and no stale audio, the next turn on the same object is a full clean turn, and
nothing (task, socket) is left after aclose. Protocol points are exact on the loopback server; the Nineninesix
points the emulator has (``Fault(action="drop", after_chunks=N)``) also run against the emulator."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from harness import NNS_KEY, SURFACES, Outcome
from surfaces import run_case, two_turns

from loopback import LoopbackServer, Mutation
from ttsbridge.emulator import TONE_VOICE_ID, Emulator, EmulatorConfig, Fault

Arm = Callable[[LoopbackServer], None]


def at(i: int) -> Arm:
    return lambda srv: srv.arm(Mutation(i, "drop"))


def handshake(*actions: object) -> Arm:
    return lambda srv: srv.handshake.extend(actions)


def on_cancel(srv: LoopbackServer) -> None:
    srv.drop_on_cancel = True


#: (point, arm, cancel_after) per provider. Nineninesix reply frames: chunk 0-3, done 4. Kitta session frames:
#: authenticated 0, ready 1, audio 2-5, usage 6, finish 7.
POINTS: dict[str, list[tuple[str, Arm, int | None]]] = {
    "nineninesix": [
        ("before_first_chunk", at(0), None),
        ("mid_audio", at(2), None),
        ("after_last_chunk_before_done", at(4), None),
        ("right_after_cancel", on_cancel, 1),
        ("handshake", handshake("drop"), None),
        (
            "concurrent_limit_retry",
            lambda s: s.arm(Mutation(0, "concurrent_limit"), Mutation(0, "drop")),
            None,
        ),
    ],
    "kitta": [
        ("before_first_chunk", at(2), None),
        ("mid_audio", at(4), None),
        ("after_last_chunk_before_finish", at(7), None),
        ("right_after_cancel", at(3), 1),
        ("handshake", handshake("drop"), None),
        ("concurrent_limit_retry", handshake(429, "drop"), None),
    ],
}
CASES = [
    pytest.param(surface, provider, arm, cancel, id=f"{surface}-{provider}-{point}")
    for surface in SURFACES
    for provider, points in POINTS.items()
    for point, arm, cancel in points
]


@pytest.mark.parametrize(("surface", "provider", "arm", "cancel_after"), CASES)
async def test_drop(surface: str, provider: str, arm: Arm, cancel_after: int | None) -> None:
    report = await run_case(surface, provider, arm, cancel_after=cancel_after)
    assert not report.problems, report.problems


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("after_chunks", [0, 2, 10_000], ids=["before_first", "mid_audio", "before_done"])
async def test_emulator_drop(surface: str, after_chunks: int) -> None:
    """The emulator's own drop fault at three points; then a clean turn on the same object."""
    async with Emulator(EmulatorConfig(default_voice=TONE_VOICE_ID, api_keys={NNS_KEY})) as emu:
        emu.add_fault(Fault(action="drop", after_chunks=after_chunks))
        outs: list[Outcome] = await two_turns(surface, "nineninesix", emu.base_url)
        assert outs[0].kind in ("audio", "typed"), outs[0]
        assert outs[1].kind == "audio" and outs[1].pcm, outs[1]
        assert emu.stats.drops == 1
