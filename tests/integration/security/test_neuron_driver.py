"""A job whose image runtime the hosts' Neuron driver rejects is refused before anything is paid for: no
RunTask, no SubmitJob, one message naming both versions and the fix. A connection that does not know its
driver only warns."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest

from airflow_provider_trainium.neuron.releases import table
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, jobs_named, operator
from tests.integration.ecs.conftest import CLUSTER, connect_trainium
from tests.integration.registry.conftest import run_dag


def rejected_driver() -> str:
    """The first driver minor the image's runtime no longer accepts (2.28 accepted -> 2.29.0.0)."""
    newest = table().image.driver_newest
    assert newest, "the image's release must name the newest driver its runtime accepts"
    major, minor = (int(part) for part in newest.split(".")[:2])
    return f"{major}.{minor + 1}.0.0"


def test_ecs_refuses_a_driver_the_runtime_rejects_with_no_run_task(ecs_world, monkeypatch, tmp_path):
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch, neuron_driver_version=rejected_driver())
    with DAG("driver_mismatch_job", schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        TrainiumJobOperator(
            task_id="job", entry_point="trainium_trainer.allreduce", distributed=False, compute="ecs", retries=0
        )
    run = run_dag(dag)

    assert str(run.state) == "failed"
    assert ecs_world.ecs.list_tasks(cluster=CLUSTER)["taskArns"] == []
    assert ecs_world.ecs.list_task_definitions()["taskDefinitionArns"] == []


def test_batch_refuses_a_driver_the_runtime_rejects_with_no_submit_job(batch_env, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from tests.conftest import set_trainium_connection

    extra = {k: v for k, v in dataclasses.asdict(batch_env.config).items() if v not in (None, "", (), {}, [])}
    extra.pop("configured")
    driver = rejected_driver()
    set_trainium_connection(monkeypatch, **{**extra, "neuron_driver_version": driver})
    ti = TaskInstanceStandIn()
    with pytest.raises(AirflowFailException) as failed:
        operator().execute(context(ti))
    message = str(failed.value)
    assert f"Neuron driver {driver}" in message and table().image.runtime in message
    assert f"pin aws-neuronx-dkms {table().image.driver}" in message
    assert jobs_named(batch_env, ti) == [] and ti.xcoms == {}
    assert batch_env.batch.describe_job_definitions(status="ACTIVE")["jobDefinitions"] == []


def test_batch_accepts_the_driver_the_release_ships(batch_env, monkeypatch):
    from airflow.sdk.exceptions import TaskDeferred

    from tests.conftest import set_trainium_connection

    extra = {k: v for k, v in dataclasses.asdict(batch_env.config).items() if v not in (None, "", (), {}, [])}
    extra.pop("configured")
    set_trainium_connection(monkeypatch, **{**extra, "neuron_driver_version": table().image.driver})
    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred):
        operator().execute(context(ti))
    assert len(jobs_named(batch_env, ti)) == 1


def test_an_unknown_driver_is_a_warning_not_a_silent_pass(batch_env, capfd):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred):
        operator().execute(context(ti))
    logged = capfd.readouterr()
    warnings = [line for line in (logged.out + logged.err).splitlines() if "warning" in line.lower()]
    assert any("neuron_driver_version" in w and table().image.runtime in w for w in warnings)
    assert len(jobs_named(batch_env, ti)) == 1


def test_the_first_task_refuses_the_mismatch_naming_both_versions(ecs_world, monkeypatch, tmp_path, capfd):
    """The DAG's first task runs the preflight checks: the run stops there, before data prep starts anything."""
    from airflow.dag_processing.dagbag import DagBag

    from tests.integration.security.test_trusted_images import DAGS, states

    ecs_world.add_instance("trn1.2xlarge")
    driver = rejected_driver()
    connect_trainium(ecs_world, monkeypatch, neuron_driver_version=driver)
    dag = DagBag(dag_folder=str(DAGS)).get_dag("trainium_mnist_mlp")

    run = dag.test(run_conf={"compute": "ecs", "instance_type": "trn1.2xlarge"})

    result = states(run)
    assert result["check_params"] == "failed" and result["prepare_data"] == "upstream_failed"
    printed = capfd.readouterr()
    assert f"neuron driver: the hosts' Neuron driver {driver} rejects" in printed.out + printed.err
    assert ecs_world.ecs.list_tasks(cluster=CLUSTER)["taskArns"] == []
