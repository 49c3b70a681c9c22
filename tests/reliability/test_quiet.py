"""Quiet networks (quick mode): blackholes before the first audio and mid-turn, stalls shorter than the
deadline, sliced writes, cut handshakes, an idle connection killed silently or closed with 1000/1001, through
the fault proxy, per public surface and provider (``quiet.py``). With the fast liveness knobs over the whole
grid; with the short timeouts (receive_timeout / event_timeout / LiveKit timeout 2.5 s) and with the defaults
for the silent faults. Detection times are measured by ``bench/chaos.py --quiet N`` (docs/reliability.md)."""

from __future__ import annotations

import pytest
from harness import PROVIDERS, SURFACES
from quiet import CASES, run_quiet

GRID = [
    pytest.param(surface, provider, name, id=f"{surface}-{provider}-{name}")
    for surface in SURFACES
    for provider in PROVIDERS
    for name in CASES
]
SILENT = ("blackhole_before_audio", "blackhole_mid_turn", "dead_idle")


@pytest.mark.parametrize(("surface", "provider", "name"), GRID)
async def test_quiet_fault(surface: str, provider: str, name: str) -> None:
    report = await run_quiet(surface, provider, CASES[name], "fast")
    assert not report.problems, report.problems


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", SILENT)
async def test_quiet_fault_with_short_timeouts(surface: str, provider: str, name: str) -> None:
    """The issue's setting: the timeout (2.5 s) fires before the liveness check at its defaults (1 + 1.5 s);
    the timed-out connection is condemned, so the next turn never goes into it."""
    report = await run_quiet(surface, provider, CASES[name], "short")
    assert not report.problems, report.problems


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("name", SILENT)
async def test_quiet_fault_with_defaults(provider: str, name: str) -> None:
    """With the defaults a Nineninesix turn that hit a silence before its first audio speaks (replayed on a
    fresh connection), a mid-turn silence is a typed error, and the next turn speaks."""
    report = await run_quiet("turns", provider, CASES[name], "defaults")
    assert not report.problems, report.problems
