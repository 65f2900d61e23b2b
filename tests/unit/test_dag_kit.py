"""The DAG kit package: every documented name, loaded from its module only when a DAG file first uses it."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from airflow_provider_trainium import dag_kit


def test_each_exported_name_is_the_one_its_module_defines():
    assert sorted(dag_kit.__all__) == sorted(dag_kit._HOMES)
    for name in dag_kit.__all__:
        home = importlib.import_module(f"{dag_kit.__name__}.{dag_kit._HOMES[name]}")
        assert getattr(dag_kit, name) is getattr(home, name), name


def test_the_package_imports_none_of_its_modules_until_a_name_is_used():
    """A DAG file that uses the templates alone must not load the gates, the checks or the helpers it never calls
    (``make bench-parse``): only a ``TYPE_CHECKING`` block names them."""
    tree = ast.parse(Path(dag_kit.__file__).read_text())
    eager = [
        ast.unparse(node)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(dag_kit.__name__)
    ]
    assert not eager


def test_a_name_it_does_not_export_is_an_attribute_error():
    assert not hasattr(dag_kit, "no_such_factory")
    assert dag_kit.params.__name__ == f"{dag_kit.__name__}.params"  # its modules stay reachable as attributes
