"""Node.js fixtures: the Kitta page's example client with its two npm packages, installed once per session.

``npm install ws @msgpack/msgpack`` (what the page says) runs into ``.cache/node-kitta-example/`` at the
repository root (gitignored), bounded by a timeout; a later run reuses it while both packages are there.
The tests skip only when ``node`` or ``npm`` is absent; a failing install fails them.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
EXAMPLE = HERE / "kitta_realtime_example.mjs"
INSTALL_DIR = HERE.parent.parent / ".cache" / "node-kitta-example"
PACKAGES = ("ws", "@msgpack/msgpack")
NPM_TIMEOUT_S = 240


def _installed(root: Path) -> bool:
    return all((root / "node_modules" / name / "package.json").is_file() for name in PACKAGES)


@pytest.fixture(scope="session")
def node_example() -> Path:
    """Path of the example ``.mjs`` inside a folder whose ``node_modules`` holds ``ws`` and ``@msgpack/msgpack``."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"Node.js is not installed (node: {node or 'absent'}, npm: {npm or 'absent'})")
    INSTALL_DIR.mkdir(parents=True, exist_ok=True)
    if not _installed(INSTALL_DIR):
        # a package.json of its own keeps npm from walking up to another project
        (INSTALL_DIR / "package.json").write_text(json.dumps({"private": True, "type": "module"}))
        cmd = [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *PACKAGES]
        try:
            done = subprocess.run(
                cmd, cwd=INSTALL_DIR, capture_output=True, text=True, timeout=NPM_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"`npm install {' '.join(PACKAGES)}` took more than {NPM_TIMEOUT_S} s")
        if done.returncode != 0 or not _installed(INSTALL_DIR):
            pytest.fail(
                f"`npm install {' '.join(PACKAGES)}` failed ({done.returncode}):\n{done.stderr[-2000:]}"
            )
    target = INSTALL_DIR / EXAMPLE.name
    shutil.copyfile(
        EXAMPLE, target
    )  # next to node_modules: ES modules resolve packages from the file's folder
    return target
