"""A job on a capacity reservation runs on the ECS cluster and capacity provider ``capacity_reservations`` maps
it to; one the map lacks (or an entry without both) is refused before RunTask. On the moto server."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.ecs.backend import EcsBackend, EcsInputError
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context
from tests.integration.conftest import calls
from tests.integration.ecs.conftest import CLUSTER, IMAGE, CallCounter, connect_trainium

CR = "cr-0123456789abcdef0"
RESERVED_CLUSTER = "trainium-capacity-block"
PROVIDER = "trn1-2xlarge-cb"
ROUTES = {CR: {"ecs_cluster": RESERVED_CLUSTER, "ecs_capacity_provider": PROVIDER}}
NEVER_STOPS = {"progression": "manual", "times": 10_000}


def spec() -> JobSpec:
    return JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=IMAGE, capacity_reservation=CR)


def reserved_world(world) -> None:
    """The cluster of the stack launched into the reservation, with one instance."""
    world.ecs.create_cluster(clusterName=RESERVED_CLUSTER)
    world.cluster = RESERVED_CLUSTER
    world.add_instance("trn1.2xlarge")
    world.cluster = CLUSTER


def test_a_reserved_job_runs_on_the_mapped_cluster_and_provider_and_a_retry_finds_it(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    reserved_world(ecs_world)
    name, tags = job_name("mnist", "train", "r1"), job_tags("mnist", "train", "r1")
    ecs = EcsBackend(ecs_world.config(capacity_reservations=ROUTES), poll_interval_seconds=0)

    handle = ecs.submit(spec(), name, tags)

    assert handle.details["cluster"] == RESERVED_CLUSTER
    (task,) = ecs_world.ecs.describe_tasks(cluster=RESERVED_CLUSTER, tasks=[handle.job_id])["tasks"]
    assert task["capacityProviderName"] == PROVIDER and task.get("launchType", "") == ""
    assert ecs_world.ecs.list_tasks(cluster=CLUSTER)["taskArns"] == []
    assert ecs.status(handle).state.value == "RUNNING"

    retry = EcsBackend(ecs_world.config(capacity_reservations=ROUTES), poll_interval_seconds=0)
    counter = CallCounter(retry.hook.conn)
    found = retry.find_existing(name, tags)
    assert found is not None and found.job_id == handle.job_id and found.details["cluster"] == RESERVED_CLUSTER
    assert counter.count("RunTask") == 0


@pytest.mark.parametrize(
    ("routes", "needle"),
    [
        ({}, f"capacity reservation {CR} is not in"),
        ({CR: {"ecs_cluster": RESERVED_CLUSTER}}, "has no ecs_capacity_provider"),
    ],
)
def test_an_unmapped_reservation_fails_the_task_before_run_task(ecs_world, moto_requests, monkeypatch, routes, needle):
    from airflow.providers.common.compat.sdk import AirflowFailException

    connect_trainium(ecs_world, monkeypatch, capacity_reservations=routes)
    op = TrainiumJobOperator(
        task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs", capacity_reservation=CR
    )
    with pytest.raises(AirflowFailException, match=needle) as failed:
        op.execute(context(TaskInstanceStandIn(dag_id="trainium_mnist_mlp", task_id="train")))
    assert isinstance(failed.value.__cause__, EcsInputError)
    assert CR in str(failed.value) and "capacity_reservations" in str(failed.value)
    recorded = moto_requests()
    assert calls(recorded, target="RunTask") == 0 and calls(recorded, target="RegisterTaskDefinition") == 0


def test_preflight_checks_the_mapped_cluster(ecs_world):
    from airflow_provider_trainium.preflight import run_preflight

    reserved_world(ecs_world)
    config = ecs_world.config(capacity_reservations=ROUTES)
    results = run_preflight(
        config, instance_type="trn1.2xlarge", nodes=1, compute="ecs", image=None, capacity_reservation=CR
    )
    cluster = next(r for r in results if r.name == "ecs cluster")
    # the mapped cluster is asked, with the mapped provider: moto's cluster has none, so it is named as missing
    assert RESERVED_CLUSTER in cluster.reason and PROVIDER in cluster.reason, cluster
