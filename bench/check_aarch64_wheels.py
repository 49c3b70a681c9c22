"""Does every runtime dependency install from a wheel on ARM Linux (aarch64) for CPython 3.10-3.13?

Pipecat Cloud's agents run on ARM; a dependency without an aarch64 wheel builds from source there (or fails).
For each requirement of ``pyproject.toml`` (``[project].dependencies`` and the extras named with ``--extras``)
and each Python version, pip resolves it as for that box without installing anything:

    pip install --dry-run --no-deps --only-binary=:all: --implementation cp --python-version 3.X
                --platform manylinux_2_17_aarch64 ... --platform manylinux_2_36_aarch64 --target T --report R REQ

(``manylinux_2_17`` = ``manylinux2014``; up to glibc 2.36, Debian 12's), and prints the wheel it would install.
``--with-deps`` checks every package of their tree too (e.g. pipecat-ai's and livekit-agents' own), each at the
version pip resolves for this interpreter. A requirement with no
such wheel is listed as MISSING with pip's reason (a package with no wheel for any platform, a source
distribution only, is listed apart); the exit status is 1 if any is missing.

    python bench/check_aarch64_wheels.py                       # the core dependencies + pipecat, livekit
    python bench/check_aarch64_wheels.py --extras pipecat,livekit,speech,emulator,redis --with-deps
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
#: manylinux_2_17 (manylinux2014) up to glibc 2.36 (Debian 12, the usual base of ARM agent images)
PLATFORMS = [f"manylinux_2_{minor}_aarch64" for minor in range(17, 37)] + ["manylinux2014_aarch64"]


def requirements(extras: list[str]) -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(
                f"--extras: pyproject.toml has no extra {extra!r} (it has {', '.join(optional)})"
            )
        reqs += [r for r in optional[extra] if not r.startswith("ttsbridge")]
    return reqs


def resolve(reqs: list[str], python: str, *, deps: bool) -> tuple[list[tuple[str, str]], str]:
    """[(name, file)] pip would install for ``python`` on aarch64 (wheels only), or ([], the reason, naming the
    package it could not find)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [
            sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python,
            *[arg for p in PLATFORMS for arg in ("--platform", p)],
            "--target", str(Path(tmp) / "t"), "--report", str(report),
        ]  # fmt: skip
        if not deps:
            cmd.append("--no-deps")
        out = subprocess.run([*cmd, *reqs], capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            found = re.search(r"No matching distribution found for (\S+)", out.stderr)
            if found is None:
                return [], " ".join(ln for ln in out.stderr.splitlines() if "ERROR" in ln)[:400]
            name = found.group(1)
            if re.search(r"requirement \S+ (?:\([^)]*\) )*\(from versions: none\)", out.stderr):
                return [], f"{name}: no wheel of any version for any platform (a source distribution only)"
            if "Requires-Python" in out.stderr:
                return [], f"{name}: no release of it supports CPython {python} (Requires-Python)"
            return [], f"{name}: no wheel for this platform"
        data = json.loads(report.read_text())
    return [(i["metadata"]["name"], i["download_info"]["url"].rsplit("/", 1)[1]) for i in data["install"]], ""


def tree(reqs: list[str]) -> list[str]:
    """Every package of the requirements' tree as ``name==version``, as pip resolves it for this interpreter
    (pip refuses to resolve dependencies for another platform unless every package is a wheel)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--disable-pip-version-check",
               "--ignore-installed", "--report", str(report), *reqs]  # fmt: skip
        subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=True)
        data = json.loads(report.read_text())
    return sorted(f"{i['metadata']['name']}=={i['metadata']['version']}" for i in data["install"])


def main(args: argparse.Namespace) -> int:
    extras = [e for e in args.extras.split(",") if e]
    reqs = requirements(extras)
    print(f"requirements ({', '.join(['core', *extras])}): {', '.join(reqs)}")
    print(f"platform: aarch64, manylinux_2_17..2_36; CPython {', '.join(args.pythons.split(','))}\n")
    direct = {re.split(r"[<>=!~ \[;]", r, maxsplit=1)[0].lower().replace("_", "-"): r for r in reqs}
    if args.with_deps:
        reqs = tree(reqs)
        print(f"with their dependencies ({len(reqs)} packages, as resolved for this interpreter)\n")
    missing, source_only = 0, set()
    for python in args.pythons.split(","):
        for req in reqs:
            got, err = resolve([req], python, deps=False)
            if err and args.with_deps and "==" in req and "any platform" not in err:
                # the tree's version is this interpreter's choice: another version may be this Python's
                name = req.split("==")[0]
                got, err2 = resolve([direct.get(name.lower().replace("_", "-"), name)], python, deps=False)
                if not err2:
                    print(f"  {python}  {req:<28} {got[0][1]} (the tree's version: {err.split(': ', 1)[1]})")
                    continue
            if err.endswith("(a source distribution only)"):
                source_only.add(req)
                print(f"  {python}  {req:<28} source only ({err})")
            elif err:
                missing += 1
                print(f"  {python}  {req:<28} MISSING ({err})")
            else:
                print(f"  {python}  {req:<28} {got[0][1]}")
    if source_only:
        print(
            f"\nno wheel at all (built from source on install, any platform): {', '.join(sorted(source_only))}"
        )
    print(f"\n{'every other package resolved to a wheel' if not missing else f'{missing} MISSING'}")
    return 1 if missing else 0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--extras", default="pipecat,livekit", help="extras of pyproject.toml to check too")
    ap.add_argument("--pythons", default=",".join(PYTHONS))
    ap.add_argument(
        "--with-deps", action="store_true", help="resolve the whole tree, not each requirement alone"
    )
    return ap.parse_args(argv)


if __name__ == "__main__":
    sys.exit(main(parse()))
