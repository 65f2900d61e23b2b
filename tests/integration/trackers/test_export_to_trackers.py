"""A real training task exports its run to a real MLflow tracking server and to a TensorBoard event file.

The server is the ``mlflow server`` a platform runs (SQLite store); the event file is read back with
TensorBoard's own reader. A second export of the same task instance adds no second MLflow run.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from airflow.sdk import DAG

from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator
from airflow_provider_trainium.trackers.gather import TaskInstanceId, collect
from airflow_provider_trainium.trackers.mlflow_export import TASK_INSTANCE_TAG, export_mlflow
from tests.conftest import free_port, set_trainium_connection
from tests.integration.registry.conftest import run_dag
from trainium_trainer.mnist_mlp.prepare import prepare

pytestmark = pytest.mark.slow
DAG_ID = "tracked_mnist"
SERVER_START_S = 120


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``mlflow server`` on a free port, waited for through its health endpoint."""
    root = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    mlflow = Path(sys.executable).with_name("mlflow")
    argv = [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--default-artifact-root", (root / "artifacts").as_uri()]  # fmt: skip
    log = (root / "server.log").open("wb")
    server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_S
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"mlflow server did not start:\n{(root / 'server.log').read_text()[-3000:]}")
            time.sleep(0.2)
        yield uri
    finally:
        server.terminate()
        server.wait(30)
        log.close()


def test_a_training_run_reaches_mlflow_and_tensorboard_once(tmp_path, monkeypatch, mlflow_server):
    from mlflow import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    data = tmp_path / "digits"
    prepare(data.as_uri(), seed=0)
    root = (tmp_path / "root").as_uri()
    logdir = (tmp_path / "tb").as_uri()
    set_trainium_connection(monkeypatch, artifact_root=root, allowed_input_prefixes=[data.as_uri()],
                            mlflow_tracking_uri=mlflow_server, tensorboard_logdir=logdir)  # fmt: skip
    with DAG(DAG_ID, schedule=None, start_date=datetime(2026, 11, 1)) as dag:
        TrainiumTrainingOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="local",
                                 job_args=["--data-uri", data.as_uri(), "--epochs", "1", "--log-every", "10"],
                                 env={"TRAINIUM_RUNTIME": "eager"}, processes_per_node=1)  # fmt: skip
    run = run_dag(dag)
    ti = run.get_task_instance("train")
    assert ti.state == "success"
    output = ti.xcom_pull(task_ids="train")
    metrics = json.loads((Path(output.removeprefix("file://")) / "metrics.json").read_text())
    logged_steps = [h["step"] for h in metrics["history"]]
    assert logged_steps and logged_steps == sorted(logged_steps)

    client = MlflowClient(tracking_uri=mlflow_server)
    experiment = client.get_experiment_by_name(DAG_ID)
    (found,) = client.search_runs([experiment.experiment_id])
    assert found.info.status == "FINISHED"
    assert found.data.tags["task_id"] == "train" and found.data.tags["run_id"] == run.run_id
    assert found.data.params["instance_type"] == "trn1.2xlarge" and found.data.params["compute"] == "local"
    loss = client.get_metric_history(found.info.run_id, "train/loss")
    assert sorted(m.step for m in loss) == logged_steps
    assert [m.value for m in sorted(loss, key=lambda m: m.step)] == pytest.approx(
        [h["loss"] for h in metrics["history"]], rel=1e-6
    )
    assert found.data.metrics["final/accuracy"] == pytest.approx(metrics["accuracy"])
    assert "cost/wall_s" in found.data.metrics

    (event_file,) = [p for p in (tmp_path / "tb").rglob("*") if "tfevents" in p.name]
    assert event_file.parent.name == "train" and event_file.parents[2].name == DAG_ID
    events = EventAccumulator(str(event_file.parent))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == logged_steps
    assert events.Scalars("final/accuracy")[-1].value == pytest.approx(metrics["accuracy"], rel=1e-6)

    # A retry or a rerun of the same task instance finds the finished run and writes nothing.
    retry = TaskInstanceId(DAG_ID, run.run_id, "train", -1, 2)
    spec = JobSpec(name="j", entry_point="m", output_uri=output)
    again = collect(retry, spec, "local", artifact_root=root, aws_conn_id=None, cost=None, summary=None)
    assert export_mlflow(again, mlflow_server, DAG_ID, logging.getLogger(__name__).info) is None
    runs = client.search_runs(
        [experiment.experiment_id], filter_string=f"tags.`{TASK_INSTANCE_TAG}` = '{again.ti.key}'"
    )
    assert [r.info.run_id for r in runs] == [found.info.run_id]
