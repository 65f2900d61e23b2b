"""K deferred Batch jobs in one event loop share one DescribeJobs call per 100 jobs per poll interval."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from airflow_provider_trainium.compute.batch.poller import BatchJobPoller
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE, CallCounter


def submit_many(batch_env, count: int) -> list[str]:
    definition = batch_env.batch.register_job_definition(
        jobDefinitionName="poll-test", type="container", containerProperties={"image": IMAGE, "vcpus": 1, "memory": 512}
    )["jobDefinitionArn"]
    ids = [
        batch_env.batch.submit_job(jobName=f"job-{i}", jobQueue=batch_env.queue, jobDefinition=definition)["jobId"]
        for i in range(count)
    ]
    moto_batch.hold_running(batch_env.region, ids)
    return ids


@pytest.mark.parametrize("count", [1, 250])
def test_k_jobs_make_ceil_k_over_100_describe_calls_per_interval(batch_env, count):
    ids = submit_many(batch_env, count)
    conn = batch_env.config.aws_conn_id
    triggers = [
        TrainiumBatchJobTrigger(handle={"job_id": job_id}, deadline=time.time() + 600, aws_conn_id=conn,
                        region_name=batch_env.region, poll_interval=0.2, stream_logs=False)
        for job_id in ids
    ]  # fmt: skip

    async def first_event(trigger):
        async for event in trigger.run():
            return event.payload

    async def scenario():
        poller = BatchJobPoller.shared(conn, batch_env.region, 0.2)
        counter = CallCounter().attach(await poller.client("batch"))
        tasks = [asyncio.create_task(first_event(t)) for t in triggers]
        for _ in range(3):
            await poller.next_round()
        rounds, calls = poller.rounds, counter["DescribeJobs"]
        assert not any(t.done() for t in tasks)
        for job_id in ids:
            moto_batch.finish(batch_env.region, job_id, success=True)
        events = await asyncio.gather(*tasks)
        return rounds, calls, events, counter["DescribeJobs"], poller.rounds

    rounds, calls, events, calls_at_end, rounds_at_end = asyncio.run(scenario())
    per_round = math.ceil(count / 100)
    assert rounds == 3 and calls == rounds * per_round
    assert calls_at_end == rounds_at_end * per_round  # the final round too: all jobs in one batch
    assert [e["state"] for e in events] == ["SUCCEEDED"] * count
    assert {e["handle"]["job_id"] for e in events} == set(ids)


def test_throttling_backs_off_and_keeps_every_waiter(batch_env):
    ids = submit_many(batch_env, 3)

    async def scenario():
        poller = BatchJobPoller.shared(batch_env.config.aws_conn_id, batch_env.region, 0.05)
        client = await poller.client("batch")
        throttled = {"left": 2}

        def throttle(**_):
            if throttled["left"]:
                throttled["left"] -= 1
                from botocore.exceptions import ClientError

                error = {"Error": {"Code": "TooManyRequestsException", "Message": "slow down"}}
                raise ClientError(error, "DescribeJobs")

        client.meta.events.register("before-call.batch.DescribeJobs", throttle)
        for job_id in ids:
            poller.watch(job_id)
        found = await poller.next_round()
        for job_id in ids:
            poller.unwatch(job_id)
        return found, poller.rounds, throttled["left"]

    found, rounds, left = asyncio.run(scenario())
    assert left == 0 and rounds == 1  # two throttled attempts, then one successful round
    assert sorted(found) == sorted(ids)
