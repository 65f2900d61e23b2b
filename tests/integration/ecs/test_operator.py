"""``trainium_mnist_mlp`` with compute=ecs in a real ``dag.test()`` run against the moto server.

Each job task (TrainiumJobOperator, TrainiumCompileOperator, TrainiumTrainingOperator) submits an ECS task,
defers on the ECS trigger, and ``dag.test()`` runs the trigger inline until the task stops. moto runs
no containers, so the check is on what each task asked ECS to run (and the registry finds no model).
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_trainium.compute import naming
from airflow_provider_trainium.links.ecs import ecs_log_url, ecs_task_url
from tests.dag_runs import states
from tests.integration.ecs.conftest import CLUSTER, connect_trainium

DAGS = Path(__file__).resolve().parents[3] / "dags"
DAG_ID = "trainium_mnist_mlp"
JOB_TASKS = ("prepare_data", "compile", "train", "evaluate")


def mnist_dag():
    """The shipped DAG, its job tasks polling every second: moto's tasks end at the first look, and the
    shared poller waits one interval (the backend's 30 s) before its first round."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    dag = bag.get_dag(DAG_ID)
    for task_id in JOB_TASKS:
        dag.get_task(task_id).poll_interval = 1
    return dag


def xcom(run, task_id: str, key: str):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = (
            session.query(XComModel)
            .filter_by(dag_id=run.dag_id, run_id=run.run_id, task_id=task_id, key=key)
            .one_or_none()
        )
        return None if row is None else XComModel.deserialize_value(row)


def ecs_task_of(world, run, task_id: str) -> dict:
    (arn,) = world.ecs.list_tasks(cluster=CLUSTER, startedBy=naming.job_name(DAG_ID, task_id, run.run_id))["taskArns"]
    return world.ecs.describe_tasks(cluster=CLUSTER, tasks=[arn])["tasks"][0]


def test_mnist_dag_runs_every_job_on_ecs_through_the_trigger(ecs_world, task_progress, monkeypatch, tmp_path):
    task_progress({"progression": "immediate"})  # each task has finished when its trigger first looks
    for _ in JOB_TASKS:  # moto frees an instance only on StopTask, not when a task ends by itself
        ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)

    run = mnist_dag().test(run_conf={"compute": "ecs", "instance_type": "trn1.2xlarge", "epochs": 1})

    result = states(run)
    upstream = ("check_params", *JOB_TASKS)
    assert {t: result[t] for t in upstream} == dict.fromkeys(upstream, "success")
    assert result["register"] == "failed"  # moto runs no container, so train wrote no model to register
    commands = {}
    for task_id in JOB_TASKS:
        task = ecs_task_of(ecs_world, run, task_id)  # exactly one ECS task per Airflow task
        handle = xcom(run, task_id, "job")
        assert handle["backend"] == "ecs" and handle["job_id"] == task["taskArn"]
        (override,) = task["overrides"]["containerOverrides"]
        commands[task_id] = override["command"]
    # the launcher's arguments (the image's ENTRYPOINT is the launcher; see neuron/container_contract.py)
    assert commands["prepare_data"][:2] == ["--nodes=1", "--single-process"]
    assert "--module=trainium_trainer.mnist_mlp.prepare" in commands["prepare_data"]
    assert "--wrap=neuron_parallel_compile" in commands["compile"]
    train = commands["train"]
    assert "--nproc-per-node=2" in train and "--module=trainium_trainer.mnist_mlp.train" in train
    assert "--compile-only" not in train

    train_task = ecs_task_of(ecs_world, run, "train")
    env = {e["name"]: e["value"] for e in train_task["overrides"]["containerOverrides"][0]["environment"]}
    assert env["TRAINIUM_OUTPUT_URI"] == xcom(run, "train", "return_value")
    assert env["NEURON_COMPILE_CACHE_URL"] == xcom(run, "compile", "return_value")["compile_cache_uri"]
    record = xcom(run, "train", "trainium_links")
    task_id = record["task_id"]
    assert record["job_id"] == xcom(run, "train", "job")["job_id"]
    assert ecs_task_url(record).endswith(f"/clusters/{CLUSTER}/tasks/{task_id}/configuration?region=us-east-1")
    assert ecs_log_url(record).endswith(f"log-events/trainium%2Ftrainer%2F{task_id}")


def test_multi_node_on_ecs_fails_the_first_task_before_any_run_task(ecs_world, task_progress, monkeypatch, tmp_path):
    """ECS runs one instance per job: the run's preflight refuses nodes=2 there, before any job starts."""
    task_progress({"progression": "immediate"})
    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)

    run = mnist_dag().test(run_conf={"compute": "ecs", "instance_type": "trn1.32xlarge", "nodes": 2})

    result = states(run)
    assert result["check_params"] == "failed"
    assert result["prepare_data"] == "upstream_failed" and result["train"] == "upstream_failed"
    assert ecs_world.ecs.list_tasks(cluster=CLUSTER)["taskArns"] == []
