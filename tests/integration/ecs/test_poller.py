"""K ECS tasks watched in one event loop share one DescribeTasks call per 100 tasks per poll interval."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from airflow_provider_trainium.compute.ecs.poller import EcsTaskPoller
from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.compute.watch import first_event
from tests.integration.ecs.conftest import IMAGE, CallCounter

INTERVAL = 0.2


def run_many(world, count: int) -> list[str]:
    """``count`` small tasks held RUNNING on one trn1.32xlarge (RunTask starts at most 10 per call)."""
    world.add_instance("trn1.32xlarge")
    definition = world.ecs.register_task_definition(
        family="poll-test", containerDefinitions=[{"name": "main", "image": IMAGE, "cpu": 256, "memory": 64}]
    )["taskDefinition"]["taskDefinitionArn"]
    arns: list[str] = []
    while len(arns) < count:
        tasks = world.ecs.run_task(cluster=world.cluster, taskDefinition=definition, count=min(10, count - len(arns)))
        arns += [t["taskArn"] for t in tasks["tasks"]]
    assert len(arns) == count
    return arns


@pytest.mark.parametrize("count", [1, 120])
def test_k_tasks_make_ceil_k_over_100_describe_calls_per_interval(ecs_world, task_progress, count):
    task_progress({"progression": "manual", "times": 10_000})  # RUNNING until stopped
    arns = run_many(ecs_world, count)
    watches = [
        EcsTaskWatch(handle={"job_id": arn, "details": {"cluster": ecs_world.cluster}}, deadline=time.time() + 600,
                     aws_conn_id=ecs_world.aws_conn_id, region_name="us-east-1", poll_interval=INTERVAL)
        for arn in arns
    ]  # fmt: skip

    async def scenario():
        poller = EcsTaskPoller.shared(ecs_world.aws_conn_id, "us-east-1", INTERVAL, ecs_world.cluster)
        counter = CallCounter(await poller.client())
        tasks = [asyncio.create_task(first_event(w, lambda _line: None)) for w in watches]
        for _ in range(3):
            await poller.next_round()
        rounds, calls = poller.rounds, counter.count("DescribeTasks")
        assert not any(t.done() for t in tasks)
        for arn in arns:
            await asyncio.to_thread(ecs_world.ecs.stop_task, cluster=ecs_world.cluster, task=arn, reason="done")
        events = await asyncio.gather(*tasks)
        return rounds, calls, events, counter.count("DescribeTasks"), poller.rounds

    rounds, calls, events, calls_at_end, rounds_at_end = asyncio.run(scenario())
    per_round = math.ceil(count / 100)
    assert rounds == 3 and calls == rounds * per_round
    assert calls_at_end <= rounds_at_end * per_round  # while they stop too (fewer watched, fewer calls)
    assert {e.handle["job_id"] for e in events} == set(arns)
    assert all(e.state.terminal for e in events)
