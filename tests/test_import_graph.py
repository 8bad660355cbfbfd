"""No import circle in ``owc/`` (issue 26): computed from the source, every import counted.

An import under ``if TYPE_CHECKING:`` or inside a function is counted too: it dodges the circle at run time,
not in the design (the module still needs the one that needs it). Modules and packages (``owc.runs``,
``owc.gateway``, ...) are both checked: a package graph with a circle means two layers lean on each other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_graph(root: Path, package: str = "owc") -> dict[str, set[str]]:
    """Each module of ``package`` under ``root`` -> the modules of the package it imports (anywhere in it)."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        modules[".".join(parts)] = (path, is_package)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        here = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        graph[name].add(f"{base}.{alias.name}")  # a submodule
                    elif base in modules:
                        graph[name].add(base)  # a name from a module (or a package's __init__)
        graph[name].discard(name)
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph.get(nxt, ()))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
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
    return found


def packages(graph: Mapping[str, Iterable[str]]) -> dict[str, set[str]]:
    """The graph folded to ``owc``'s subpackages and top-level modules (``owc.runs.table`` -> ``owc.runs``)."""

    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, imported in graph.items():
        folded.setdefault(top(module), set()).update(top(m) for m in imported if top(m) != top(module))
    return folded


def test_no_module_imports_in_a_circle() -> None:
    graph = import_graph(ROOT)
    assert len(graph) > 80  # the whole package was read
    assert circles(graph) == []


def test_no_package_leans_on_another_that_leans_back() -> None:
    folded = packages(import_graph(ROOT))
    assert circles(folded) == []
    # The direction the house names: the core never imports a shell.
    for core in ("owc.ids", "owc.protocol", "owc.render", "owc.rules"):
        shells = folded.get(core, set()) & {"owc.gateway", "owc.runs", "owc.store", "owc.emit", "owc.owui", "owc.sim"}
        assert shells == set(), core


def test_the_check_sees_a_circle_hidden_under_type_checking(tmp_path: Path) -> None:
    """The checker itself: a circle one side of which is only a type-checking import is found."""
    pkg = tmp_path / "owc"
    (pkg / "runs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "runs" / "__init__.py").write_text("")
    (pkg / "runs" / "table.py").write_text("from owc.runs.cuts import Cuts\n")
    (pkg / "runs" / "cuts.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from owc.runs.table import RunTable\n"
    )
    (pkg / "runs" / "other.py").write_text("def f():\n    from . import table\n")
    graph = import_graph(tmp_path)
    assert graph["owc.runs.other"] == {"owc.runs.table"}  # a relative import inside a function is counted
    assert circles(graph) == [["owc.runs.cuts", "owc.runs.table"]]
    assert circles(packages(graph)) == []
