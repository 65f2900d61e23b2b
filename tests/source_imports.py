"""What a package's modules import when they run, read from the source with ``ast`` (never by importing it).

Shared by the provider's import-graph test and the images' import tests. An import counts wherever it stands,
at the top of a file or inside a function (a lazy import still runs on some path); imports under
``if TYPE_CHECKING:`` are left out, since they never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _run_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except those under an ``if TYPE_CHECKING:`` (its ``else`` still runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


@cache
def parsed(path: Path) -> ast.Module:
    """A source file's tree, parsed once for every scan of the session (the layering, graph and boundary tests)."""
    return ast.parse(path.read_text(), str(path))


@cache
def imported_names(path: Path, root: Path = ROOT) -> tuple[tuple[str, int], ...]:
    """Each dotted name ``path`` imports at run time, with its line (see :func:`_imported_names`)."""
    return tuple(_imported_names(path, root))


def _imported_names(path: Path, root: Path) -> Iterator[tuple[str, int]]:
    """Each dotted name ``path`` imports at run time, with its line: ``import a.b`` and ``from a import b`` both
    give ``a.b`` (``b`` may be a module or a name in ``a``: :func:`owner` tells), relative imports resolved."""
    me = module_name(path, root)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in _run_time_nodes(parsed(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def owner(name: str, modules: set[str]) -> str | None:
    """The module of ``modules`` that ``name`` lies in: itself, else its longest enclosing module."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def package_modules(package: str, root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``package`` (a folder under ``root``) by dotted name."""
    return {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}
