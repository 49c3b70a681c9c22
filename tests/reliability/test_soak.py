"""Soak (quick mode): one long-lived object per surface and provider, 30 % of the turns barged-in at a random
audio frame. No stale sample, every turn ends with audio (a full turn unless barged-in), server-side sockets
back to the idle pool once the turns are over, no task left after close, and (Pipecat) no frame kept by the
harness. The RSS slope needs thousands of turns: ``bench/chaos.py --soak N`` measures it."""

from __future__ import annotations

import pytest
from harness import PROVIDERS, SURFACES
from soak import soak

TURNS = 40


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("surface", SURFACES)
async def test_soak(surface: str, provider: str) -> None:
    report = await soak(surface, provider, TURNS, barge_rate=0.3, seed=9)
    assert report.turns == TURNS and report.barge_ins > 0
    assert report.stale == 0
    assert not report.failed, report.failed[:5]
    assert report.sockets_after_turns <= 0, (
        f"{report.sockets_after_turns} socket(s) open beyond the idle pool"
    )
    assert report.tasks_after_close == 0
    if surface == "pipecat":
        # the harness itself keeps no frame (run_test's sink would keep them all, and the soak's RSS slope
        # would measure the harness): by the EndFrame, at most about one turn's worth is still alive
        assert 0 < report.frames_alive <= report.frames_seen // TURNS, (
            f"{report.frames_alive} of {report.frames_seen} frames still alive at the end of the run"
        )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_finished_turns_are_released(provider: str) -> None:
    """Nothing per turn is kept once the turn is over: the provider holds no finished turn object."""
    report = await soak("turns", provider, TURNS, barge_rate=0.3, seed=5)
    assert not report.failed and report.stale == 0
    assert report.turns_alive == 0, f"{report.turns_alive} of {TURNS} finished turns still alive"
