"""The installed wheel, as a platform team's Airflow has it: run by .ci/wheel-airflow.sh (floor and newest Airflow).

Self-contained on purpose: it runs from a copy outside the checkout, so nothing of the repository is importable and
every module comes from the wheel. The DAGs folder holds what ``airflow-trainium dags install`` copied.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

DAGS_FOLDER = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])


@pytest.fixture(autouse=True)
def _no_aws_profile(monkeypatch):
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def set_trainium_connection(monkeypatch, **extra) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps({"conn_type": "trainium", "extra": extra}))


def dag_bag():
    try:
        from airflow.dag_processing.dagbag import DagBag  # Airflow 3.1+
    except ImportError:
        from airflow.models.dagbag import DagBag  # Airflow 3.0
    return DagBag(dag_folder=str(DAGS_FOLDER))  # AIRFLOW__CORE__LOAD_EXAMPLES=False: no examples


def test_the_provider_is_the_installed_wheel_not_a_checkout():
    import airflow_provider_trainium

    site_packages = Path(sysconfig.get_paths()["purelib"]).resolve()
    assert Path(airflow_provider_trainium.__file__).resolve().is_relative_to(site_packages)
    with zipfile.ZipFile(os.environ["TRAINIUM_WHEEL"]) as archive:
        names = archive.namelist()
    assert not [name for name in names if "devserver" in name]
    assert not [name for name in names if name.startswith("trainer/")]  # the in-container package: trainium_trainer


def test_the_airflow_line_is_the_one_asked_for():
    import airflow
    from packaging.version import Version

    if os.environ["AIRFLOW_LINE"] == "floor":
        assert airflow.__version__ == "3.0.6"
    else:
        assert Version(airflow.__version__) >= Version("3.3")


def test_every_provider_module_imports():
    from airflow_provider_trainium.get_provider_info import get_provider_info

    info = get_provider_info()
    groups = [group for kind in ("hooks", "operators", "sensors", "triggers") for group in info[kind]]
    modules = [module for group in groups for module in group["python-modules"]]
    modules += [path.rsplit(".", 1)[0] for path in info["extra-links"]]
    for module in modules:
        importlib.import_module(module)


def test_the_dags_folder_holds_the_shipped_dags_and_every_one_parses():
    from airflow_provider_trainium.deployment_files import dags_folder

    shipped = sorted(path.name for path in dags_folder().glob("*.py"))
    assert sorted(path.name for path in DAGS_FOLDER.glob("*.py")) == shipped
    bag = dag_bag()
    assert bag.import_errors == {}
    assert {"trainium_mnist_mlp", "trainium_allreduce_smoke", "trainium_llama_finetune"} <= set(bag.dag_ids)


def test_a_second_install_changes_nothing():
    before = {path.name: path.stat().st_mtime_ns for path in DAGS_FOLDER.iterdir()}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "airflow-trainium"), "dags", "install", "--to", str(DAGS_FOLDER)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "copied" not in done.stdout
    assert {path.name: path.stat().st_mtime_ns for path in DAGS_FOLDER.iterdir()} == before


def test_the_training_image_context_comes_from_the_installed_package():
    from airflow_provider_trainium.deployment_files import BUNDLED, image_context
    from airflow_provider_trainium.image.context import BuildContext

    assert image_context() == BUNDLED
    context = BuildContext.load(image_context(), "docker/Dockerfile")
    assert {"docker/Dockerfile", "trainium_trainer/launch.py"} <= {entry.path for entry in context.entries}


def written_like_the_dag_processor(bag):
    """Airflow 3.0's dag.test() does not write the DAG to the database, so the model asset the register task
    emits would be inactive; a deployment's DAG processor writes it. Do what it does."""
    if hasattr(bag, "sync_to_db"):
        from airflow.dag_processing.bundles.manager import DagBundlesManager

        DagBundlesManager().sync_bundles_to_db()
        bag.sync_to_db("dags-folder", None)
    return bag


def test_mnist_dag_trains_and_registers_on_local_compute(tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    dag = written_like_the_dag_processor(dag_bag()).get_dag("trainium_mnist_mlp")
    run = dag.test(run_conf={"compute": "local"})  # default epochs: the accuracy gate is fixed in the DAG
    assert str(run.state).endswith("success")
    latest = json.loads((tmp_path / "models" / "mnist-mlp" / "aliases" / "latest.json").read_text())
    assert latest["version"] == 1
    manifest = json.loads((tmp_path / "models" / "mnist-mlp" / "versions" / "1" / "manifest.json").read_text())
    assert manifest["metrics"]["accuracy"] >= 0.5


def test_connection_form_and_hook_load():
    from airflow.providers_manager import ProvidersManager

    assert "password" in ProvidersManager().field_behaviours["trainium"]["hidden_fields"]
