#!/usr/bin/env python3
"""Structure gates, from the repo root: ``python .ci/gates.py`` (exit 1, naming each offender, when one fails).

* No function (or method) in ``src/`` longer than ``--max-lines`` (60) lines, counted from its ``def`` line
  to its last line, docstring included (decorators not).
* No import cycle among the modules of ``src/ttsbridge``: the imports that run when a module is imported (its
  top level and class bodies, inside ``if``/``try``/``with`` too), not those inside functions (lazy) nor under
  ``if TYPE_CHECKING:``; ``from a import b`` counts as an import of ``a.b`` when that is a module, else of ``a``.

Standard library only (``ast``); parses every file once, well under a second.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
PACKAGE = "ttsbridge"


def long_functions(src: Path, max_lines: int) -> list[str]:
    """``path:line name (n lines)`` of every function longer than ``max_lines``."""
    out = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > max_lines:
                    out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    return out


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _eager_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _eager_imports(node.body)
            yield from _eager_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _eager_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _eager_imports(node.body)


def import_graph(src: Path, package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports eagerly."""
    files = {_module_name(p, src): p for p in sorted((src / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        edges = graph.setdefault(name, set())
        for node in _eager_imports(ast.parse(path.read_text(encoding="utf-8")).body):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1
                    anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names]
            for target in targets:
                while target and target not in files:  # the longest prefix that is one of our modules
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one cycle through it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # (recursion depth: the import chain, a few dozen at most)
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_one_cycle(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _one_cycle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A cycle through the component's first module (breadth-first back to it), for the report."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    return sorted(component)  # (unreachable for a strongly connected component)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--max-lines", type=int, default=60, help="longest function allowed (default 60)")
    args = ap.parse_args(argv)
    long = long_functions(SRC, args.max_lines)
    for line in long:
        print(f"function over {args.max_lines} lines: {line}")
    loops = cycles(import_graph(SRC, PACKAGE))
    for loop in loops:
        print("import cycle: " + " -> ".join(loop))
    print(f"gates: {len(long)} function(s) over {args.max_lines} lines, {len(loops)} import cycle(s)")
    return 1 if long or loops else 0


if __name__ == "__main__":
    sys.exit(main())
