"""The import graph of the product packages and the benchmarks, read with `ast` (nothing is imported).

Every import counts: at module level, inside functions and under ``TYPE_CHECKING``. A package's
``__init__`` importing its own children is its face, not an arrow, and is left out.

    python tests/support/import_graph.py        # prints every circle and every arrow against DESIGN
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("formats", "pva", "simulator", "schemas", "benchmarks")

#: What each package may not import (DESIGN.md §2: simulator -> formats <- pva; nothing imports tests
#: or benchmarks). pva reaches the simulator only from `pva simulate`, at the time that command runs.
FORBIDDEN = {
    "formats": ("pva", "simulator", "tests", "benchmarks"),
    "simulator": ("pva", "tests", "benchmarks"),
    "pva": ("tests", "benchmarks"),
    "schemas": ("formats", "pva", "simulator", "tests", "benchmarks"),
    "benchmarks": ("tests",),
}
SIMULATOR_FROM_PVA = {"pva.cli.simulate"}


def modules() -> dict[str, pathlib.Path]:
    """Every module of the packages, by dotted name (a package by its own name)."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imported(name: str, path: pathlib.Path, known: dict[str, pathlib.Path]) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                child = f"{module}.{alias.name}"
                yield child if child in known else module


def graph() -> dict[str, set[str]]:
    """Module -> the modules of the packages it imports (an external import is named as written)."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = set()
        for target in _imported(name, path, known):
            while target not in known and "." in target and target.split(".")[0] in PACKAGES:
                target = target.rpartition(".")[0]
            if target == name or (path.name == "__init__.py" and target.startswith(name + ".")):
                continue
            targets.add(target)
        edges[name] = targets
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:
        nonlocal counter
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in edges:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def wrong_arrows(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs that point against DESIGN's direction."""
    wrong = []
    for source, targets in sorted(edges.items()):
        top = source.split(".")[0]
        for target in sorted(targets):
            target_top = target.split(".")[0]
            if (
                target_top in FORBIDDEN.get(top, ())
                or top == "pva"
                and target_top == "simulator"
                and source not in SIMULATOR_FROM_PVA
            ):
                wrong.append((source, target))
    return wrong


if __name__ == "__main__":
    edges = graph()
    for component in circles(edges):
        print("circle:", ", ".join(component))
    for source, target in wrong_arrows(edges):
        print(f"arrow against DESIGN: {source} -> {target}")
