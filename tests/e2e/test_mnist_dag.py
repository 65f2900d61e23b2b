"""``trainium_mnist_mlp`` end to end with ``dag.test()`` on local compute and torch-xla CPU."""

import hashlib
import importlib.metadata
import json
from pathlib import Path

import pytest

from tests.conftest import set_trainium_connection

DAGS = Path(__file__).resolve().parents[2] / "dags"


def get_dag(dag_id: str):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag.get_dag(dag_id)


def states(dag_run) -> dict[str, str]:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter_by(dag_id=dag_run.dag_id, run_id=dag_run.run_id).all()
        return {ti.task_id: str(ti.state) for ti in tis}


@pytest.fixture
def artifact_root(tmp_path, monkeypatch) -> Path:
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    return tmp_path


@pytest.mark.slow
def test_pipeline_trains_evaluates_and_registers(artifact_root):
    dag = get_dag("trainium_mnist_mlp")
    run = dag.test(run_conf={"compute": "local", "epochs": 5})
    assert str(run.state) == "success", states(run)
    (train_dir,) = [p for p in (artifact_root / "runs" / "trainium_mnist_mlp").glob("*/train") if p.is_dir()]
    metrics = json.loads((train_dir / "metrics.json").read_text())
    assert metrics["accuracy"] >= 0.90
    assert metrics["world_size"] == 2 and metrics["runtime"] == "xla"
    assert metrics["xla_cache_missing"] == 0  # the compile step produced every graph training needed
    evaluation = json.loads((train_dir / "evaluation.json").read_text())
    assert evaluation["accuracy"] == pytest.approx(metrics["accuracy"])

    version_dir = artifact_root / "models" / "mnist-mlp" / "versions" / "1"
    manifest = json.loads((version_dir / "manifest.json").read_text())
    assert manifest["metrics"]["accuracy"] >= 0.90
    assert manifest["source"]["dag_id"] == "trainium_mnist_mlp" and manifest["source"]["run_id"] == run.run_id
    assert manifest["params"]["epochs"] == 5
    assert manifest["software"]["torch"] == importlib.metadata.version("torch").split("+")[0]
    listed = {f["path"]: f for f in manifest["files"]}
    assert {"model.safetensors", "model_config.json", "metrics.json"} <= set(listed)
    for path, entry in listed.items():
        data = (version_dir / "files" / path).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"])
    latest = json.loads((artifact_root / "models" / "mnist-mlp" / "aliases" / "latest.json").read_text())
    assert latest["version"] == 1


def test_bad_layout_fails_before_any_job_starts(artifact_root):
    dag = get_dag("trainium_mnist_mlp")
    run = dag.test(run_conf={"compute": "local", "nodes": 2, "instance_type": "trn1.2xlarge"})
    result = states(run)
    assert str(run.state) == "failed"
    assert result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed"
    assert not (artifact_root / "runs").exists()
