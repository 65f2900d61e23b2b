"""Adding a backend touches no operator: one ComputeBackend subclass and one table entry, run via dag.test().

The worked example of docs/architecture.md. The backend below "runs" a job by recording the container argv
it was given; the operator resolves, checks, attaches or submits, waits and returns exactly as on the real
backends.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from airflow_provider_trainium.compute.backends import BackendEntry, compute_choices, register_backend
from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobState, JobStatus, LogSink, WatchRequest
from airflow_provider_trainium.neuron.spec import JobSpec

STATE_ENV = "RECORDING_BACKEND_DIR"


class RecordingBackend(ComputeBackend):
    """Jobs are JSON files: submit writes one, and it has succeeded as soon as it exists."""

    name = "recording"
    defers = False  # waited on in the worker: no trigger shell needed
    runs_image = False

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    @classmethod
    def from_config(cls, config: Any, options: dict[str, Any]) -> RecordingBackend:
        return cls(Path(os.environ[STATE_ENV]))

    def check(self, spec: JobSpec) -> None:
        if spec.nodes > 1:
            raise ValueError("the recording backend runs one node")

    def _file(self, job_name: str) -> Path:
        return self.state_dir / f"{job_name}.json"

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        plan = self.plan(spec)  # runs_image is False: no Trainium, so no MFU peak
        record = {"argv": list(plan.argv), "tags": tags, "spec_hash": spec.content_hash()}
        self._file(job_name).write_text(json.dumps(record))
        return JobHandle(self.name, job_name, job_name, {"spec_hash": spec.content_hash()})

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        path = self._file(job_name)
        if not path.exists():
            return None
        return JobHandle(self.name, job_name, job_name, {"spec_hash": json.loads(path.read_text())["spec_hash"]})

    def status(self, handle: JobHandle) -> JobStatus:
        return JobStatus(JobState.SUCCEEDED if self._file(handle.job_name).exists() else JobState.FAILED)

    def cancel(self, handle: JobHandle, reason: str) -> None:
        self._file(handle.job_name).unlink(missing_ok=True)

    def wait_until(self, request: WatchRequest, log: LogSink) -> JobStatus:
        return self.status(request.handle)


def register() -> None:
    register_backend(BackendEntry("recording", f"{__name__}:RecordingBackend", description="writes a JSON file"))


DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.compute.test_fake_backend import register

register()  # what a user's own backend module does on import

with DAG("recording_backend", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    TrainiumJobOperator(task_id="job", entry_point="trainium_trainer.mnist_mlp.train", job_args=["--epochs", "1"],
                        compute="recording", distributed=False)
"""


def test_a_registered_backend_runs_an_unchanged_job_operator(tmp_path, monkeypatch):
    import importlib.util

    from airflow_provider_trainium.compute.backends import unregister_backend
    from tests.conftest import set_trainium_connection

    state = tmp_path / "jobs"
    state.mkdir()
    monkeypatch.setenv(STATE_ENV, str(state))
    set_trainium_connection(monkeypatch, artifact_root=(tmp_path / "artifacts").as_uri())
    folder = tmp_path / "dags"
    folder.mkdir()
    (folder / "recording_backend.py").write_text(DAG_FILE)
    bundle = {"name": "recording", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
              "kwargs": {"path": str(folder), "refresh_interval": 0}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))
    spec = importlib.util.spec_from_file_location("recording_backend", folder / "recording_backend.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    try:
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        assert "recording" in compute_choices()
        run = module.dag.test()
    finally:
        unregister_backend("recording")

    assert str(run.state) == "success"
    (job,) = [json.loads(p.read_text()) for p in state.glob("*.json")]
    assert job["argv"][-4:] == ["--module=trainium_trainer.mnist_mlp.train", "--", "--epochs", "1"]
    assert job["tags"]["airflow:dag_id"] == "recording_backend"
    output = run.get_task_instance("job").xcom_pull(task_ids="job")
    assert output.startswith((tmp_path / "artifacts").as_uri() + "/runs/recording_backend/")
