"""Task states are not evidence: with ``evaluate`` marked success (it never ran), ``register`` publishes and
promotes only a model whose verdict record passed its very files; a backfill does not move ``latest``.

``dag.test(mark_success_pattern=...)`` marks the evaluation task success without running it, as a user with
task-instance edit rights would; the verdicts are written by the trainer's own writer, as the job would.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.naming import job_name
from airflow_provider_trainium.registry import ModelRegistry
from airflow_provider_trainium.registry.seal import job_key
from tests.conftest import set_trainium_connection
from tests.integration.registry.conftest import run_dag
from trainium_trainer import boundary
from trainium_trainer.common.verdict import write_verdict

RUN_AFTER = datetime(2026, 1, 2, tzinfo=UTC)


def run_id() -> str:
    """The run ``dag.test(run_after=RUN_AFTER, logical_date=RUN_AFTER)`` creates."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.types import DagRunType

    return DagRun.generate_run_id(run_type=DagRunType.MANUAL, logical_date=RUN_AFTER, run_after=RUN_AFTER)


def model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "runs" / "model"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\x02" * 64)
    (model / "metrics.json").write_text('{"accuracy": 0.5}')
    return model


def run_register(tmp_path: Path, dag_id: str, **run_kwargs):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator

    with DAG(dag_id, schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        evaluate = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate",
                                       distributed=False, compute="local",
                                       output_uri=(tmp_path / "evaluation").as_uri())  # fmt: skip
        register = TrainiumRegisterModelOperator(task_id="register", model_name="m",
                                                 source_uri=str(tmp_path / "runs/model"), promote_alias="latest",
                                                 promote_manual_runs=True, retries=0)  # fmt: skip
        evaluate >> register
    run = run_dag(dag, mark_success_pattern="^evaluate$", run_after=RUN_AFTER, logical_date=RUN_AFTER, **run_kwargs)
    return {ti.task_id: ti.state for ti in run.get_task_instances()}


def verdict(tmp_path: Path, model: Path, passed: bool, dag_id: str, monkeypatch, run: str | None = None) -> Path:
    """The verdict this run's evaluation job (of run ``run``: another run's) would write, sealed with its key."""
    monkeypatch.setenv(boundary.ENV_EVIDENCE_KEY, job_key(job_name(dag_id, "evaluate", run or run_id())))
    write_verdict((tmp_path / "evaluation").as_uri(), model_uri=model.as_uri(), metric="accuracy",
                  value=0.97 if passed else 0.4958, threshold=0.9, comparison=">=")  # fmt: skip
    return tmp_path / "evaluation" / boundary.VERDICT_FILE


@pytest.fixture
def root(tmp_path, monkeypatch) -> str:
    root = (tmp_path / "root").as_uri()
    set_trainium_connection(monkeypatch, artifact_root=root)
    return root


@pytest.mark.parametrize("case", ["no verdict", "failed", "other files", "passed flipped", "another run's job"])
def test_a_marked_success_evaluation_promotes_nothing(tmp_path, root, monkeypatch, case):
    model = model_dir(tmp_path)
    dag_id = "evidence_" + "".join(c if c.isalnum() else "_" for c in case)
    if case in ("failed", "passed flipped"):
        written = verdict(tmp_path, model, False, dag_id, monkeypatch)
        if case == "passed flipped":  # what a job with write access to the run's prefix did (0.4958 < 0.9)
            written.write_text(json.dumps({**json.loads(written.read_text()), "passed": True}))
    if case == "other files":
        verdict(tmp_path, model, True, dag_id, monkeypatch)
        (model / "model.safetensors").write_bytes(b"\x03" * 64)  # not what was judged
    if case == "another run's job":  # its own verdict, correctly sealed, planted under this run's evaluation
        verdict(tmp_path, model, True, dag_id, monkeypatch, run="manual__2025-01-01T00:00:00+00:00")
    states = run_register(tmp_path, dag_id)
    assert states == {"evaluate": "success", "register": "failed"}
    assert ModelRegistry(root).list_models() == []


def test_a_passing_verdict_for_these_files_registers_and_promotes(tmp_path, root, monkeypatch):
    model = model_dir(tmp_path)
    verdict(tmp_path, model, True, "evidence_passed", monkeypatch)
    assert run_register(tmp_path, "evidence_passed") == {"evaluate": "success", "register": "success"}
    assert ModelRegistry(root).get_alias("m", "latest").version == 1
