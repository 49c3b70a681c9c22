"""Reliability suites (quick mode): drop storm, fuzzed server frames, soak; every log line and exception text
of the session is scanned for the API keys (``harness.SECRETS``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from harness import KeyScan, scan_keys


@pytest.fixture(autouse=True)
def key_scan() -> Iterator[KeyScan]:
    """Captures every log line of the test (stdlib logging and loguru) and fails it if a key shows up."""
    with scan_keys() as scan:
        yield scan
    leaks = scan.leaks()
    assert not leaks, f"API key in {len(leaks)} log line(s), e.g. {leaks[0][:300]!r}"
