"""Every DAG imports cleanly and fast; the provider never pulls torch into the scheduler or workers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
HEAVY = ["torch", "torch_xla", "transformers", "boto3", "botocore", "numpy", "trainer"]


def test_every_dag_imports_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert "trainium_mnist_mlp" in bag.dag_ids
    for dag_id in bag.dag_ids:
        assert "compute" in bag.get_dag(dag_id).params, f"{dag_id} has no compute param"


@pytest.mark.parametrize("dag_file", sorted(p.name for p in DAGS.glob("*.py")))
def test_dag_files_import_no_heavy_module(dag_file):
    code = (
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('d', {str(DAGS / dag_file)!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_provider_modules_never_import_torch():
    import airflow_provider_trainium

    root = Path(airflow_provider_trainium.__file__).parent
    modules = sorted(
        "airflow_provider_trainium." + ".".join(p.relative_to(root).with_suffix("").parts)
        for p in root.rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(m for m in ('torch', 'torch_xla', 'transformers', 'trainer') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_provider_info_entry_point_matches_the_distribution():
    from importlib.metadata import entry_points

    (ep,) = [
        e for e in entry_points(group="apache_airflow_provider") if e.value.startswith("airflow_provider_trainium")
    ]
    info = ep.load()()
    assert info["package-name"] == "airflow-provider-trainium"
    assert {c["connection-type"] for c in info["connection-types"]} == {"trainium"}
    for group in ("hooks", "operators"):
        for entry in info[group]:
            for module in entry["python-modules"]:
                __import__(module)
