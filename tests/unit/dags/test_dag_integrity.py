"""Every DAG imports cleanly and fast; the provider never pulls torch into the scheduler or workers."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

DAGS = Path(__file__).resolve().parents[3] / "dags"
HEAVY = ["torch", "torch_xla", "transformers", "boto3", "botocore", "numpy", "trainium_trainer"]


def test_every_dag_imports_without_errors():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert "trainium_mnist_mlp" in bag.dag_ids
    for dag_id in bag.dag_ids:
        assert "compute" in bag.get_dag(dag_id).params, f"{dag_id} has no compute param"


@pytest.mark.process
def test_dag_files_import_no_heavy_module():
    """One fresh interpreter imports every DAG file in turn and reports what heavy modules each one added."""
    files = sorted(str(p) for p in DAGS.glob("*.py"))
    code = (
        "import importlib.util, json, sys\n"
        "added = {}\n"
        # the trainer's boundary module (standard library only) is the one part of the trainer a DAG may load
        "light = {'trainium_trainer', 'trainium_trainer.boundary'}\n"
        f"heavy = lambda: {{m for m in sys.modules if m.split('.')[0] in {HEAVY!r}}} - light\n"
        f"for path in {files!r}:\n"
        "    before = heavy()\n"
        "    spec = importlib.util.spec_from_file_location('d', path)\n"
        "    spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "    added[path] = sorted(heavy() - before)\n"
        "print(json.dumps(added))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(added) == files and len(files) >= 4
    assert {path: mods for path, mods in added.items() if mods} == {}


@pytest.mark.process
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
        "heavy = ('torch', 'torch_xla', 'transformers', 'trainium_trainer')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # trainium_trainer.boundary is the one module of the trainer the provider imports (standard library only)
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) <= {"trainium_trainer", "trainium_trainer.boundary"}


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
