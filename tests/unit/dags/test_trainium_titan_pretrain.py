"""``trainium_titan_pretrain`` on several nodes: its ``train`` task, rendered for a run with ``compute=batch`` and
``nodes=2``, is an AWS Batch multi-node parallel job of the TorchTitan trainer; ECS refuses the same job, and the
run's first task refuses more nodes than the catalog allows for the instance type."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium.compute.batch import definitions as defs
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.plan import container_plan
from tests.dag_runs import get_dag

DAG_ID = "trainium_titan_pretrain"
RUN_ID = "manual__2026-12-06T00:00:00+00:00"
ROOT = "s3://bucket/trainium"
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:{'ab' * 32}"
PLAN = {"data_uri": f"{ROOT}/llama/titan/r/data", "model_uri": f"{ROOT}/llama/titan/r/model",
        "checkpoint_uri": f"{ROOT}/llama/titan/r/checkpoints"}  # fmt: skip


@pytest.fixture(scope="module")
def dag() -> Any:
    return get_dag(DAG_ID)


def config() -> Any:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

    return TrainiumConfig(configured=True, artifact_root=ROOT, region_name="us-east-1", log_group="/trainium/jobs",
                          job_role_arn="arn:aws:iam::123456789012:role/job", image=IMAGE,
                          ecs_cluster="trn", subnets=["subnet-1"])  # fmt: skip


def rendered_train_spec(dag: Any, backend: Any, **conf: Any) -> Any:
    """The ``train`` task's job as a try of a run with ``conf`` would build it, the plan task's values given."""
    task = copy.deepcopy(dag.get_task("train"))  # rendering replaces the templates on the task
    params = {**{name: dag.params[name] for name in dag.params}, **conf}
    ti = SimpleNamespace(dag_id=DAG_ID, run_id=RUN_ID, task_id="train", map_index=-1, try_number=1,
                         xcom_pull=lambda task_ids=None, **_: None)  # fmt: skip
    context = {"params": params, "ti": ti, "run_id": RUN_ID, "dag": dag,
               "trainium_plan": lambda task_id="check_params": PLAN}  # fmt: skip
    task.render_template_fields(context)
    assert (task.compute, str(task.nodes)) == (conf["compute"], str(conf["nodes"]))
    return task.build_spec(context, config(), backend)


def test_the_train_task_with_two_nodes_on_batch_renders_a_multi_node_parallel_job_of_torchtitan(dag) -> None:
    from airflow_provider_trainium.compute.batch.backend import BatchBackend

    backend = BatchBackend(config())
    spec = rendered_train_spec(dag, backend, compute="batch", nodes=2, instance_type="trn2.48xlarge")
    assert (spec.nodes, spec.instance_type, spec.stack) == (2, "trn2.48xlarge", "native")
    assert spec.entry_point == "trainium_trainer.titan.train" and spec.checkpoint_uri == PLAN["checkpoint_uri"]
    args = list(spec.args)
    assert args[args.index("--checkpoint-uri") + 1] == PLAN["checkpoint_uri"]  # s3://: mirrored on each node

    plan = container_plan(spec)
    definition = defs.build_job_definition(plan, backend.settings)
    assert definition["type"] == "multinode"
    props = definition["nodeProperties"]
    assert props["numNodes"] == 2 and props["mainNode"] == 0
    (node_range,) = props["nodeRangeProperties"]
    assert node_range["targetNodes"] == "0:" and node_range["container"]["instanceType"] == "trn2.48xlarge"
    request = defs.submit_request(plan, job_name="j", job_queue="q", job_definition="d", tags={})
    (override,) = request["nodeOverrides"]["nodePropertyOverrides"]
    command = override["containerOverrides"]["command"]
    assert "--nodes=2" in command and "--module=trainium_trainer.titan.train" in command
    defs.validate_node_overrides(definition, request)


def test_ecs_refuses_the_same_two_node_job(dag) -> None:
    from airflow_provider_trainium.compute.ecs.backend import EcsBackend

    backend = EcsBackend(config())
    spec = rendered_train_spec(dag, backend, compute="ecs", nodes=2, instance_type="trn2.48xlarge")
    with pytest.raises(ValueError, match="compute='ecs' runs one instance per job, but nodes=2"):
        backend.check_spec(spec)


def test_the_first_task_takes_the_catalogs_node_count_for_the_instance_type_and_refuses_more(
    dag, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.delenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", raising=False)
    most = CATALOG["trn2.48xlarge"].max_nodes
    assert most > 1 and dag.params.get_param("nodes").schema["maximum"] >= most
    params = {**{name: dag.params[name] for name in dag.params}, "compute": "local", "instance_type": "trn2.48xlarge"}
    check = dag.get_task("check_params").python_callable
    ti = SimpleNamespace(dag_id=DAG_ID, run_id="manual__1")
    assert check(params={**params, "nodes": 2}, run_id="manual__1", ti=ti)["checkpoint_uri"]
    with pytest.raises(AirflowFailException, match="nodes"):
        check(params={**params, "nodes": most + 1}, run_id="manual__1", ti=ti)
