"""The LiveKit plugins stand apart from Pipecat: importing them loads no Pipecat module, and no module of ours
that they load imports Pipecat code, not even lazily inside a function (the provider registry sits below the
framework adapters; Pipecat's service factory lives in ``ttsbridge.pipecat``)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"

CHILD = """
import json, sys
import livekit.plugins.kitta, livekit.plugins.nineninesix
print(json.dumps({
    "pipecat": sorted(m for m in sys.modules if m == "pipecat" or m.startswith("pipecat.")),
    "ours": sorted(
        m.__file__ for n, m in list(sys.modules.items())
        if (n.startswith("ttsbridge") or n.startswith("livekit.plugins.")) and getattr(m, "__file__", None)
    ),
}))
"""


def _imports_pipecat(path: Path) -> list[str]:
    """Every import of Pipecat code in ``path`` (``pipecat...`` or ``ttsbridge.pipecat...``), at any depth."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found += [f"{path.relative_to(SRC)}:{node.lineno} {n}" for n in names if _is_pipecat(n)]
    return found


def _is_pipecat(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in ("pipecat", "ttsbridge.pipecat"))


def test_the_livekit_plugins_import_no_pipecat_code() -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["pipecat"] == []
    ours = [Path(f) for f in loaded["ours"] if Path(f).is_relative_to(SRC)]
    assert {"livekit/plugins/kitta/tts.py", "livekit/plugins/nineninesix/tts.py"} <= {
        p.relative_to(SRC).as_posix() for p in ours
    }
    assert [hit for path in ours for hit in _imports_pipecat(path)] == []
