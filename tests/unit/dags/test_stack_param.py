"""Every training DAG has a ``stack`` param, and its first task refuses a stack the instance family cannot train
(on local compute too: the refusal is for the instance type the run stands in for)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium.dag_kit import planned

DAGS = Path(__file__).resolve().parents[3] / "dags"
FIRST_TASK = {
    "trainium_mnist_mlp": "check_params",
    "trainium_llama_pretrain": "check_params",
    "trainium_llama_finetune": "check_params",
    "trainium_allreduce_smoke": "check_layout",
    "trainium_titan_pretrain": "check_params",
}
#: DAGs whose trainer runs on one stack: it is their param's default and only choice.
ONLY_STACK = {"trainium_titan_pretrain": "native"}


@pytest.fixture(scope="module")
def bag():
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS))


def first_task_params(dag, **conf: object) -> dict[str, object]:
    return {**{name: dag.params[name] for name in dag.params}, **conf}


@pytest.mark.parametrize("dag_id", sorted(set(FIRST_TASK) - set(ONLY_STACK)))
def test_the_stack_param_offers_auto_xla_native_with_auto_by_default(bag, dag_id: str) -> None:
    param = bag.get_dag(dag_id).params.get_param("stack")
    assert param.value == "auto" and param.schema["enum"] == ["auto", "xla", "native"]


@pytest.mark.parametrize("dag_id", sorted(ONLY_STACK))
def test_a_one_stack_dag_offers_only_its_stack(bag, dag_id: str) -> None:
    param = bag.get_dag(dag_id).params.get_param("stack")
    assert param.value == ONLY_STACK[dag_id] and param.schema["enum"] == [ONLY_STACK[dag_id]]


@pytest.mark.parametrize("conf", [{}, {"stack": "auto"}, {"stack": "xla"}])
def test_the_titan_dag_refuses_trn1_in_its_first_task_naming_stack(bag, conf, monkeypatch, tmp_path) -> None:
    """TorchTitan runs on the native stack only: the message names the families to use, never the XLA stack."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    dag = bag.get_dag("trainium_titan_pretrain")
    params = first_task_params(dag, instance_type="trn1.32xlarge", **conf)
    with pytest.raises(AirflowFailException, match=r"^stack .*trn1 \(trn1.32xlarge\)") as refused:
        dag.get_task("check_params").python_callable(params=params)
    message = str(refused.value)
    assert "trainium_trainer.titan.train runs on stack 'native' only" in message and "trn2, trn3" in message
    assert "use stack 'xla'" not in message


def test_the_titan_dag_plans_a_trn2_run(bag, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    dag = bag.get_dag("trainium_titan_pretrain")
    params = first_task_params(dag, compute="local")
    run = SimpleNamespace(dag_id=dag.dag_id, run_id="manual__1")  # the plan record goes under this run's prefix
    plan = dag.get_task("check_params").python_callable(params=params, run_id="manual__1", ti=run)
    assert plan["checkpoint_uri"].startswith("file://")


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


@pytest.mark.parametrize(("compute", "root"), [("ecs", "s3://bucket/p"), ("batch", "s3://bucket/p"),
                                               ("local", "s3://bucket/p")])  # fmt: skip
def test_the_titan_dag_checkpoints_to_the_runs_checkpoint_uri_on_every_compute(compute, root) -> None:
    """On S3 too: the trainer mirrors it on the node (trainium_trainer/common/mirror.py), so a retry resumes."""
    import importlib.util

    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

    loader = importlib.util.spec_from_file_location("titan_dag_under_test", DAGS / "trainium_titan_pretrain.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    config = TrainiumConfig(configured=True, artifact_root=root)
    plan = module.run_plan({"compute": compute, "nodes": 1}, config, {"run_id": "manual__1"})
    assert plan["checkpoint_uri"].startswith(root)
    args = list(module.dag.get_task("train").job_args)
    assert args[args.index("--checkpoint-uri") + 1] == planned("checkpoint_uri")
