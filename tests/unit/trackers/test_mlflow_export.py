"""An export finds its task instance's earlier MLflow run: an unfinished one is redone, never kept beside."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.trackers.gather import Point, RunExport, TaskInstanceId
from airflow_provider_trainium.trackers.mlflow_export import TASK_INSTANCE_TAG, export_mlflow

EXPERIMENT = "dag"
# Imported while collecting: importing mlflow (and numpy, scipy under it) starts `uname -p` and `lscpu`, which the
# unit tests' guard refuses once a test runs. The export itself runs in-process, on a file store.
with pytest.MonkeyPatch.context() as no_telemetry:
    no_telemetry.setenv("MLFLOW_DISABLE_TELEMETRY", "true")  # set while it imports: no usage-report thread
    mlflow = pytest.importorskip("mlflow")


def export(try_number: int) -> RunExport:
    return RunExport(TaskInstanceId("dag", "run", "train", -1, try_number), {"nodes": "1"},
                     {"train/loss": [Point(1, 2.0, 1_700_000_000_000)]}, {"final/accuracy": 0.9})  # fmt: skip


def runs_of(client: Any, ti: TaskInstanceId) -> list[Any]:
    from mlflow.entities import ViewType

    experiment_id = client.get_experiment_by_name(EXPERIMENT).experiment_id
    found = client.search_runs([experiment_id], filter_string=f"tags.`{TASK_INSTANCE_TAG}` = '{ti.key}'",
                               run_view_type=ViewType.ACTIVE_ONLY)  # fmt: skip
    return list(found)


@pytest.mark.parametrize("status", ["RUNNING", "FAILED"])  # a worker killed mid-export; an export that raised
def test_an_unfinished_run_of_the_task_instance_is_redone_so_one_finished_run_remains(tmp_path, monkeypatch, status):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps its file store for such uses only
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = (tmp_path / "mlruns").as_uri()
    client = mlflow.MlflowClient(tracking_uri=uri)
    first = export(1)
    # the first try's export crashed half-way: its run has the params but no metrics and never finished
    crashed = client.create_run(client.create_experiment(EXPERIMENT), tags=first.ti.tags()).info.run_id
    client.log_param(crashed, "nodes", "1")
    if status != "RUNNING":
        client.set_terminated(crashed, status)

    notes: list[str] = []
    written = export_mlflow(export(2), uri, EXPERIMENT, lambda msg, *args: notes.append(msg % args))

    (run,) = runs_of(client, first.ti)
    assert run.info.run_id == written != crashed
    assert run.info.status == "FINISHED" and run.data.tags["trainium.export"] == "complete"
    assert run.data.metrics == {"train/loss": 2.0, "final/accuracy": 0.9}
    assert f"MLflow run {crashed} of this task instance is unfinished: deleted and exported again" in notes
    # a later export finds the finished run and writes nothing
    assert export_mlflow(export(3), uri, EXPERIMENT, lambda *_: None) is None
    assert [r.info.run_id for r in runs_of(client, first.ti)] == [written]
