"""DAG files a test writes for itself, imported as ``dag.test()`` needs them: in a bundle of their own.

``dag.test()`` runs only a DAG that a configured bundle holds, so the test's folder becomes the one bundle
(``AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST``) and the file is then imported from there; the test gets
the module and takes its DAG (or DAGs) from it.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest


def import_dag_file(
    folder: Path, name: str, source: str, bundle: str, monkeypatch: pytest.MonkeyPatch, *, module: str | None = None
) -> ModuleType:
    """``source`` written as ``<folder>/<name>.py`` (the folder made if missing), the folder configured as the
    bundle ``bundle``, and the file imported as ``module`` (default ``name``)."""
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(source)
    config = {
        "name": bundle,
        "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
        "kwargs": {"path": str(folder), "refresh_interval": 0},
    }
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([config]))
    spec = importlib.util.spec_from_file_location(module or name, path)
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded
