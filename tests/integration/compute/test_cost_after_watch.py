"""A watched job's cost comes from what its watch saw as it ended: no second describe call, the same figures.

The watch loop already describes the job (Batch: the job and its node jobs; ECS: the task) as it ends, and
its event carries each node's billed start and stop. The cost step prices those; a counter on the backend's own
client shows it asks nothing, and the figures equal what the service's own records give.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobState, WatchRequest
from airflow_provider_trainium.compute.cost import job_cost
from airflow_provider_trainium.compute.ecs.backend import EcsBackend
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.pricing import PRICES
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE as BATCH_IMAGE
from tests.integration.batch.conftest import CallCounter as BatchCallCounter
from tests.integration.ecs.conftest import IMAGE as ECS_IMAGE
from tests.integration.ecs.conftest import MOTO_REGION, CallCounter
from tests.task_instance import TaskInstanceStandIn

TAGS = {"airflow:dag_id": "d", "airflow:task_id": "t", "airflow:run_id": "r1", "airflow:map_index": "-1"}


def batch_spec(nodes: int) -> JobSpec:
    return JobSpec(name="train", entry_point="trainium_trainer.allreduce", instance_type="trn1.32xlarge", nodes=nodes,
                   image=BATCH_IMAGE, output_uri="s3://bucket/runs/1", timeout_seconds=3600).validate()  # fmt: skip


def ended_multi_node_job(batch_env, spec: JobSpec, name: str) -> Any:
    """A 3-node job that ran 10 minutes, its node 2 started 6 minutes late, and then succeeded."""
    backend = batch_env.backend()
    handle = backend.submit(spec, name, TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    moto_batch.job(batch_env.region, handle.job_id).job_started_at = datetime.now() - timedelta(minutes=10)
    moto_batch.start_nodes(batch_env.region, handle.job_id, 3, batch_env.logs, batch_env.log_group)
    moto_batch.job(batch_env.region, f"{handle.job_id}#2").latest_attempt["startedAt"] += 6 * 60 * 1000
    moto_batch.finish(batch_env.region, handle.job_id, success=True)
    return backend, handle


def test_batch_cost_after_the_worker_side_watch_asks_batch_nothing(batch_env):
    spec = batch_spec(nodes=3)
    backend, handle = ended_multi_node_job(batch_env, spec, "job-watched")
    status = backend.wait(handle, lambda line: None, 600)
    assert status.state is JobState.SUCCEEDED and status.billed_intervals is not None
    assert len(status.billed_intervals) == 3  # every node job's attempt, not the parent's time x 3

    counter = BatchCallCounter().attach(backend.hook.client)  # the backend's own client, not the poller's
    watched = job_cost(backend, handle, spec, billed=status.billed_intervals)
    assert counter["DescribeJobs"] == 0

    assert watched == job_cost(backend, handle, spec)  # what Batch's own records give, asked again
    assert 3 * 600 - 6 * 60 <= watched["usd"] / 21.5 * 3600 < 3 * 600 - 6 * 60 + 60


def test_a_deferred_batch_jobs_cost_is_read_from_its_stored_event(batch_env):
    from airflow_provider_trainium.operators.job import TrainiumJobOperator
    from airflow_provider_trainium.operators.prepared_job import PreparedJob

    spec = batch_spec(nodes=3)
    backend, handle = ended_multi_node_job(batch_env, spec, "job-deferred")

    async def event_of(trigger) -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("no event")

    trigger = backend.trigger(WatchRequest(handle, time.time() + 600))
    event = json.loads(json.dumps(asyncio.run(event_of(trigger))))  # as stored
    ti = TaskInstanceStandIn(run_id="r1")
    op = TrainiumJobOperator(task_id="t", entry_point="trainium_trainer.allreduce", compute="batch")
    counter = BatchCallCounter().attach(op.backend_for("batch").hook.client)  # the client execute_complete uses
    op.execute_complete({"ti": ti}, event, prepared=PreparedJob("batch", spec, "job-deferred", TAGS).to_dict())
    assert counter["DescribeJobs"] == 0
    assert ti.xcoms["trainium_cost"] == job_cost(backend, handle, spec)


def test_ecs_cost_after_the_watch_asks_ecs_nothing(ecs_world, task_progress):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ecs.models import ecs_backends

    task_progress({"progression": "manual", "times": 1})  # a few polls from RUNNING to STOPPED
    ecs_world.add_instance("trn1.2xlarge")
    backend = EcsBackend(ecs_world.config(), poll_interval_seconds=0)
    spec = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=ECS_IMAGE)
    handle = backend.submit(spec, job_name("mnist", "train", "r1"), job_tags("mnist", "train", "r1"))
    task = ecs_backends[DEFAULT_ACCOUNT_ID][MOTO_REGION].tasks[ecs_world.cluster][handle.job_id]
    started = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)  # as the ECS agent reports them (moto sets neither)
    task.started_at, task.stopped_at = started, started + timedelta(minutes=45)

    status = backend.wait(handle, lambda line: None, 600)
    assert status.state is JobState.SUCCEEDED
    assert status.billed_intervals == ((started.timestamp(), started.timestamp() + 2700),)

    # counted on the backend's own client: the watch's shared poller (its own async client) may still have a
    # round in flight at the server when the wait returns, which a count at the server would see
    counter = CallCounter(backend.hook.conn)
    watched = job_cost(backend, handle, spec, billed=status.billed_intervals)
    assert counter.count("DescribeTasks") == 0
    assert watched == job_cost(backend, handle, spec)
    assert counter.count("DescribeTasks") == 1  # without what the watch saw, the cost asks ECS
    assert watched["usd"] == pytest.approx(round(PRICES["trn1.2xlarge"].usd_per_hour * 0.75, 4))
