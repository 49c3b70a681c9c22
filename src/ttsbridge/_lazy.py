"""Lazy package attributes (PEP 562): a package's public names are imported from their module on first use.

``import ttsbridge.pipecat`` then costs only the package itself; ``from ttsbridge.pipecat import
NineninesixTTSService`` imports the Nineninesix service and what it needs (not Kitta's). Nothing heavy (a
provider the app does not use, the cache's SQLite backend, ...) is imported until it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``: ``names`` maps each public name to the module that
    defines it (absolute). The value is kept in ``namespace`` (the package's globals) once imported."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
