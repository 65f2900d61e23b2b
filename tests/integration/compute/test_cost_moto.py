"""Cost records from what AWS Batch and ECS report, against the moto server through the Airflow connection.

moto's Batch records startedAt/stoppedAt on jobs, node jobs and their attempts. moto's ECS records neither
on a task: the ECS test sets them in moto's backend, as the ECS agent reports them on AWS.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_provider_trainium.compute.cost import job_cost
from airflow_provider_trainium.compute.ecs.backend import EcsBackend
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.pricing import PRICES, parse_prices
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE as BATCH_IMAGE
from tests.integration.ecs.conftest import IMAGE as ECS_IMAGE
from tests.integration.ecs.conftest import MOTO_REGION

TAGS = {"airflow:dag_id": "d", "airflow:task_id": "t", "airflow:run_id": "r1", "airflow:map_index": "-1"}


def batch_spec(nodes: int) -> JobSpec:
    return JobSpec(name="train", entry_point="trainium_trainer.allreduce", instance_type="trn1.32xlarge", nodes=nodes,
                   image=BATCH_IMAGE, output_uri="s3://bucket/runs/1", timeout_seconds=3600).validate()  # fmt: skip


def node_seconds(batch, job_id: str, nodes: int) -> float:
    """What the test reads itself from DescribeJobs: every node job's attempts, stop minus start."""
    described = batch.describe_jobs(jobs=[f"{job_id}#{i}" for i in range(nodes)])["jobs"]
    assert len(described) == nodes
    return sum((a["stoppedAt"] - a["startedAt"]) / 1000 for job in described for a in job["attempts"])


def test_batch_multi_node_cost_sums_every_node_attempt(batch_env):
    backend = batch_env.backend()
    spec = batch_spec(nodes=3)
    handle = backend.submit(spec, "job-cost", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    parent = moto_batch.job(batch_env.region, handle.job_id)
    parent.job_started_at = datetime.now() - timedelta(minutes=10)  # the scheduler started it 10 minutes ago
    moto_batch.start_nodes(batch_env.region, handle.job_id, 3, batch_env.logs, batch_env.log_group)
    late = moto_batch.job(batch_env.region, f"{handle.job_id}#2").latest_attempt  # node 2 came up 6 minutes late
    late["startedAt"] += 6 * 60 * 1000

    running = job_cost(backend, handle, spec)  # the cost so far
    assert running["stopped_at"] is None and running["usd"] > 0

    moto_batch.finish(batch_env.region, handle.job_id, success=True)
    started_ms = moto_batch.job(batch_env.region, f"{handle.job_id}#0").latest_attempt["startedAt"]
    for node in range(3):  # every node stops 11 minutes after the first started (after the running read, which
        # came ~10 minutes in): the figures below hold no wall clock
        moto_batch.job(batch_env.region, f"{handle.job_id}#{node}").latest_attempt["stoppedAt"] = started_ms + 660_000
    cost = job_cost(backend, handle, spec)

    seconds = node_seconds(batch_env.batch, handle.job_id, 3)
    assert seconds == 3 * 660 - 6 * 60  # billed per node, not nodes x the parent's time
    assert cost["usd"] == pytest.approx(21.50 * seconds / 3600, abs=1e-3)
    # The final record is never less than the running one, within the rounding of both to 1/10,000 USD and
    # the whole milliseconds Batch reports times in (the running one uses the worker's clock).
    assert cost["usd"] >= running["usd"] - 1e-3
    assert cost["estimate_usd"] == cost["usd"] and cost["is_estimate"] is False
    assert (cost["nodes"], cost["instance_type"]) == (3, "trn1.32xlarge")
    assert cost["price_per_node_hour_usd"] == PRICES["trn1.32xlarge"].usd_per_hour
    assert cost["price_date"] == PRICES["trn1.32xlarge"].as_of
    assert cost["wall_s"] == 660
    assert cost["started_at"] < cost["stopped_at"]


def test_batch_cost_uses_the_connection_prices(batch_env):
    backend = batch_env.backend()
    spec = batch_spec(nodes=2)
    handle = backend.submit(spec, "job-priced", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    moto_batch.job(batch_env.region, handle.job_id).job_started_at = datetime.now() - timedelta(hours=1)
    moto_batch.start_nodes(batch_env.region, handle.job_id, 2, batch_env.logs, batch_env.log_group)
    moto_batch.finish(batch_env.region, handle.job_id, success=True)

    prices = {**PRICES, **parse_prices({"as_of": "2026-11-20", "trn1.32xlarge": 10.0}, "test")}
    cost = job_cost(backend, handle, spec, prices=prices)

    seconds = node_seconds(batch_env.batch, handle.job_id, 2)
    assert cost["usd"] == pytest.approx(10.0 * seconds / 3600, abs=1e-3) and cost["usd"] >= 20.0
    assert cost["price_date"] == "2026-11-20"


def test_ecs_task_cost_runs_from_started_to_stopped(ecs_world, task_progress):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ecs.models import ecs_backends

    task_progress({"progression": "manual", "times": 10_000})
    ecs_world.add_instance("trn1.2xlarge")
    backend = EcsBackend(ecs_world.config(), poll_interval_seconds=0)
    spec = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=ECS_IMAGE)
    try_key = "manual__2026-01-01T00:00:00+00:00"
    handle = backend.submit(spec, job_name("mnist", "train", try_key), job_tags("mnist", "train", try_key))

    unstarted = job_cost(backend, handle, spec)  # moto reports no startedAt: nothing has run yet
    assert unstarted["usd"] == 0.0 and unstarted["started_at"] is None

    task = ecs_backends[DEFAULT_ACCOUNT_ID][MOTO_REGION].tasks[ecs_world.cluster][handle.job_id]
    started = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    task.started_at, task.stopped_at = started, started + timedelta(minutes=45)
    described = ecs_world.ecs.describe_tasks(cluster=ecs_world.cluster, tasks=[handle.job_id])["tasks"][0]
    assert described["stoppedAt"] - described["startedAt"] == timedelta(minutes=45)

    cost = job_cost(backend, handle, spec)

    assert cost["usd"] == pytest.approx(round(PRICES["trn1.2xlarge"].usd_per_hour * 0.75, 4))
    assert cost["wall_s"] == 2700.0 and cost["nodes"] == 1 and cost["is_estimate"] is False
    assert (cost["started_at"], cost["stopped_at"]) == ("2026-11-30T12:00:00+00:00", "2026-11-30T12:45:00+00:00")
