"""The provider's modules import one another without a loop, read from the source with ``ast``.

An edge is every import of an ``airflow_provider_trainium`` module, at the top of a file or inside a
function (a lazy import is still a dependency, and a loop of them is one refactor away from an
``ImportError`` at start-up). Imports under ``if TYPE_CHECKING:`` are left out: they never run.
Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``, but those start before ``a.b.c`` and so
never close a loop; only the module named counts.
"""

from __future__ import annotations

from pathlib import Path

from tests.source_imports import ROOT, imported_names, module_name, owner, package_modules

PROVIDER = "airflow_provider_trainium"


def imported_modules(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The provider modules ``path`` imports when it runs (``from m import n`` counts ``m.n`` if a module)."""
    me = module_name(path, root)
    found = {owner(name, modules) for name, _ in imported_names(path, root)}
    return {m for m in found if m is not None and m != me}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    paths = package_modules(PROVIDER, root)
    return {name: imported_modules(path, set(paths), root) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One loop through each strongly connected group of modules (Tarjan), each starting at its least name."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []

    def visit(v: str) -> None:
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
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_loop(graph, group) for group in groups)


def _loop(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest loop from the group's least module back to itself, inside the group (breadth first)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return [*paths[v], start]
            if w not in paths:
                paths[w] = [*paths[v], w]
                queue.append(w)
    raise AssertionError(f"no loop in {group}")  # pragma: no cover - a group of two or more always has one


def test_the_provider_has_no_import_loop():
    found = cycles(import_graph())
    assert found == [], "import loops:\n" + "\n".join(" -> ".join(loop) for loop in found)


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / PROVIDER / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_lazy_import_closes_a_loop_and_a_type_checking_one_does_not(tmp_path):
    _write(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from airflow_provider_trainium import b\n",
            "b.py": "def f():\n    from airflow_provider_trainium.a import x\n",
            "c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import y\nelse:\n    pass\n",
            "d.py": "from .c import z\n",
        },
    )
    graph = import_graph(tmp_path)
    assert graph[f"{PROVIDER}.b"] == {f"{PROVIDER}.a"} and graph[f"{PROVIDER}.c"] == set()
    assert cycles(graph) == [[f"{PROVIDER}.a", f"{PROVIDER}.b", f"{PROVIDER}.a"]]
