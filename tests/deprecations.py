"""The suite fails on deprecated framework API (Pipecat 2.0 removes what 1.14 deprecates), used by our code or
by our tests.

The ``filterwarnings`` of ``pyproject.toml`` turn every ``DeprecationWarning`` into an error, except the
third-party noise they name by module (a framework's own imports of a deprecated module). That is not enough
for Pipecat: its ``warn_deprecated`` raises under a forced ``always`` filter, so the error filter never
sees it, and it names a frame inside Pipecat (``TTSService.__init__`` for a deprecated keyword our code
passed). :func:`no_deprecated_api` (autouse, every test) records what passes the filters and fails the test
on any ``DeprecationWarning`` the same ``filterwarnings`` list does not ignore. LiveKit logs its deprecations
(``deprecate_params``, ``logger.warning("... is deprecated ...")``) on the ``livekit.agents`` logger: a
record of it saying "deprecated" fails the test too.

A test that exercises on purpose what an application may still do with a deprecated use (LiveKit 1.8's
text after a flush) says so: ``@pytest.mark.deprecated_use("regex of the message")``; only those pass.
"""

from __future__ import annotations

import builtins
import logging
import re
import sys
import warnings
from collections.abc import Iterator

import pytest

_Filter = tuple[str, "re.Pattern[str]", type[Warning], "re.Pattern[str]"]


def _parse(line: str) -> _Filter:
    """One ``filterwarnings`` line: ``action:message:category:module`` (as Python's ``-W``)."""
    action, message, category, module = ([*line.split(":"), "", "", "", ""])[:4]
    cat: type[Warning] = getattr(builtins, category.strip()) if category.strip() else Warning  # builtins only
    return (
        action.strip(),
        re.compile(message.strip(), re.I),
        cat,
        re.compile(module.strip() + r"\Z" if module.strip() else ".*"),
    )


def _module_of(filename: str) -> str:
    if filename.startswith("<frozen "):
        return filename[len("<frozen ") : -1]
    for name, mod in list(sys.modules.items()):
        if getattr(mod, "__file__", None) == filename:
            return name
    return filename


def _action(filters: list[_Filter], w: warnings.WarningMessage) -> str:
    module = _module_of(w.filename)
    for action, message, category, mod in reversed(filters):  # the last line that matches wins
        if issubclass(w.category, category) and message.match(str(w.message)) and mod.match(module):
            return action
    return "default"


class _DeprecationLog(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if "deprecated" in record.getMessage().lower():
            self.records.append(record)


@pytest.fixture(autouse=True)
def no_deprecated_api(request: pytest.FixtureRequest) -> Iterator[None]:
    filters = [_parse(line) for line in request.config.getini("filterwarnings")]
    allowed = [re.compile(m.args[0]) for m in request.node.iter_markers("deprecated_use")]
    log = _DeprecationLog()
    livekit = logging.getLogger("livekit.agents")
    livekit.addHandler(log)
    try:
        with warnings.catch_warnings(record=True) as caught:  # keeps pytest's filters; records what passes
            yield
    finally:
        livekit.removeHandler(log)
    bad = []
    for w in caught:
        if issubclass(w.category, DeprecationWarning) and _action(filters, w) == "error":
            bad.append(f"{w.category.__name__} at {w.filename}:{w.lineno}: {w.message}")
        elif _action(filters, w) != "ignore":
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)  # pytest still shows it
    bad += [f"livekit.agents log at {r.pathname}:{r.lineno}: {r.getMessage()}" for r in log.records]
    bad = [b for b in bad if not any(a.search(b) for a in allowed)]
    if bad:
        pytest.fail("deprecated framework API used:\n" + "\n".join(bad), pytrace=False)
