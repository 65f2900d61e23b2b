"""A job's env is part of what it runs: a cleared task whose env changed starts a new job, never reattaches.

The Llama DAGs pass the ``runtime`` param to the trainer through ``env`` (``dag_kit.RUNTIME_ENV``). A run that
trained with ``runtime=xla``, cleared and rerun with ``runtime=eager``, must not reattach to (or reuse the result
of) the xla job: the job's env must change the spec hash every backend records and ``find_or_submit`` compares.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.compute.attach import find_or_submit
from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.conftest import set_trainium_connection
from tests.unit.compute.test_attach import Recorded
from tests.unit.operators.test_job import TaskInstanceStandIn

DAGS = Path(__file__).resolve().parents[3] / "dags"
RUN_ID = "manual__2026-11-30T00:00:00+00:00"


@pytest.fixture(scope="module")
def pretrain_task() -> Any:
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(DAGS / "trainium_llama_pretrain.py")).get_dag("trainium_llama_pretrain")
    return dag, dag.get_task("pretrain")


class PlannedRun(TaskInstanceStandIn):
    """A task instance of a pretrain run: ``returned`` holds what its upstream tasks returned (task id -> value)."""

    returned: dict[str, Any] = {}

    def xcom_pull(self, task_ids: str | None = None, **_: Any) -> Any:
        return self.returned.get(str(task_ids))  # build_image: nothing built on local compute


def rendered_spec(pretrain_task: Any, tmp_path: Path, runtime: str) -> JobSpec:
    """The job spec the DAG's ``pretrain`` task builds for a run with ``runtime``, through Airflow's templating."""
    dag, task = pretrain_task
    op = task.prepare_for_execution()
    params = {**{name: dag.params[name] for name in dag.params}, "compute": "local", "runtime": runtime}
    ti = PlannedRun(dag_id=dag.dag_id, task_id=task.task_id, run_id=RUN_ID)
    plan = dag.get_task("check_params").python_callable(params=params, run_id=RUN_ID, ti=ti)  # the run's real plan
    cache = f"{tmp_path.as_uri()}/compile-cache/{dag.dag_id}"  # where the compile task puts it for this run
    ti.returned = {"check_params": plan, "compile": {"compile_cache_uri": cache}}
    context: dict[str, Any] = {"params": params, "ti": ti, "run_id": RUN_ID, "dag": dag}
    op.render_template_fields(context)
    return op.prepare(context).spec


def test_the_llama_runtime_reaches_the_job_env_and_changes_its_hash(pretrain_task, tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    xla = rendered_spec(pretrain_task, tmp_path, "xla")
    eager = rendered_spec(pretrain_task, tmp_path, "eager")
    assert xla.env["TRAINIUM_RUNTIME"] == "xla" and eager.env["TRAINIUM_RUNTIME"] == "eager"
    assert {k: v for k, v in xla.to_dict().items() if k != "env"} == {
        k: v for k, v in eager.to_dict().items() if k != "env"
    }  # only the env differs...
    assert xla.content_hash() != eager.content_hash()  # ...and that is another job


@pytest.mark.parametrize("state", [JobState.RUNNING, JobState.SUCCEEDED])
def test_a_job_that_ran_with_another_env_is_neither_attached_nor_reused(state):
    """Cleared after switching xla -> eager: the xla job (running or done) is left alone, an eager one starts."""
    xla = JobSpec(name="t", entry_point="trainium_trainer.llama.train", env={"TRAINIUM_RUNTIME": "xla"})
    eager = xla.with_changes(env={"TRAINIUM_RUNTIME": "eager"})
    backend = Recorded()
    backend.end(find_or_submit(backend, xla, "job", {}).handle, state)
    again = find_or_submit(backend, eager, "job", {})
    assert again.status is None and len(backend.jobs) == 2
    assert again.handle.details["spec_hash"] == eager.content_hash() != xla.content_hash()


@pytest.mark.parametrize(
    "env", [{}, {"TRAINIUM_RUNTIME": "eager"}, {"TRAINIUM_RUNTIME": "xla", "NEURON_RT_LOG_LEVEL": "INFO"}]
)
def test_every_env_change_changes_the_spec_hash(env):
    base = JobSpec(name="t", entry_point="trainium_trainer.llama.train", env={"TRAINIUM_RUNTIME": "xla"})
    assert base.with_changes(env=env).content_hash() != base.content_hash()
    assert base.with_changes(env=dict(base.env)).content_hash() == base.content_hash()
