"""Every training DAG has a ``stack`` param, and its first task refuses a stack the instance family cannot train
(on local compute too: the refusal is for the instance type the run stands in for)."""

from __future__ import annotations

from pathlib import Path

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

DAGS = Path(__file__).resolve().parents[3] / "dags"
FIRST_TASK = {
    "trainium_mnist_mlp": "check_params",
    "trainium_llama_pretrain": "check_params",
    "trainium_llama_finetune": "check_params",
    "trainium_allreduce_smoke": "check_layout",
}


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def first_task_params(dag, **conf: object) -> dict[str, object]:
    return {**{name: dag.params[name] for name in dag.params}, **conf}


@pytest.mark.parametrize("dag_id", sorted(FIRST_TASK))
def test_the_stack_param_offers_auto_xla_native_with_auto_by_default(bag, dag_id: str) -> None:
    param = bag.get_dag(dag_id).params.get_param("stack")
    assert param.value == "auto" and param.schema["enum"] == ["auto", "xla", "native"]


@pytest.mark.parametrize("dag_id", sorted(FIRST_TASK))
def test_native_on_trn1_fails_the_first_task_naming_stack(bag, dag_id: str, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    dag = bag.get_dag(dag_id)
    task = dag.get_task(FIRST_TASK[dag_id])
    params = first_task_params(dag, instance_type="trn1.32xlarge", stack="native", compute="local", nodes=1)
    with pytest.raises(AirflowFailException, match=r"stack 'native' does not train on trn1 \(trn1.32xlarge\)"):
        task.python_callable(params=params)


@pytest.mark.parametrize("dag_id", sorted(FIRST_TASK))
def test_the_jobs_carry_the_runs_stack_where_they_run_on_its_instance_type(bag, dag_id: str) -> None:
    dag = bag.get_dag(dag_id)
    jobs = [t for t in dag.tasks if hasattr(t, "stack")]
    assert jobs, f"{dag_id} runs no job"
    for job in jobs:
        follows = job.instance_type == "{{ params.instance_type }}"
        assert job.stack == ("{{ params.stack }}" if follows else "auto"), job.task_id
