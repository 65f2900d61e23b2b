"""A restarted trigger resumes each CloudWatch stream where the last one stopped: no line twice, none lost.

The triggers read the moto server's CloudWatch Logs; the "restart" drops the trigger mid-stream and builds
a new one from its serialized kwargs, as a triggerer does after it restarts.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_provider_trainium.compute.cloudwatch import LogCursor, NodeLogs, cursor_uri
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger
from tests.conftest import MOTO_REGION

GROUP = "/trainium/jobs"


def logs_client(aws_conn_id: str) -> Any:
    from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

    return AwsLogsHook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).conn


def write(client: Any, stream: str, events: list[tuple[int, str]]) -> None:
    client.put_log_events(
        logGroupName=GROUP,
        logStreamName=stream,
        logEvents=[{"timestamp": ts, "message": message} for ts, message in events],
    )


async def _with_logs(aws_conn_id: str, read) -> None:
    from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook

    async with await AwsLogsHook(aws_conn_id=aws_conn_id, region_name=MOTO_REGION).get_async_conn() as logs:
        await read(logs)


def ecs_trigger(aws_conn_id: str, stream: str, cursor: str) -> TrainiumEcsTaskTrigger:
    handle = {
        "backend": "ecs",
        "job_id": "arn:aws:ecs:us-east-1:123456789012:task/trainium/abc",
        "job_name": "train",
        "details": {"cluster": "trainium", "log_group": GROUP, "log_stream": stream},
    }
    return TrainiumEcsTaskTrigger(handle, time.time() + 600, aws_conn_id, MOTO_REGION, log_cursor_uri=cursor)


@pytest.fixture
def now_ms() -> int:
    return int(time.time() * 1000) - 60_000


def test_restarted_ecs_trigger_emits_no_line_twice(aws_conn_id, now_ms):
    client = logs_client(aws_conn_id)
    client.create_log_group(logGroupName=GROUP)
    client.create_log_stream(logGroupName=GROUP, logStreamName="trainer/abc")
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    S3Hook(aws_conn_id=aws_conn_id).get_conn().create_bucket(Bucket="artifacts")
    cursor = cursor_uri("s3://artifacts/runs/mnist/r1/train", "arn:aws:ecs:us-east-1:1:task/trainium/abc")
    # two lines share a timestamp across the restart: the cursor counts them
    write(client, "trainer/abc", [(now_ms, "epoch 1"), (now_ms + 1, "epoch 2 a"), (now_ms + 1, "epoch 2 b")])

    first = ecs_trigger(aws_conn_id, "trainer/abc", cursor)
    before: list[str] = []
    asyncio.run(_with_logs(aws_conn_id, first.watch().follower(before.append).fetch))
    assert before == ["epoch 1", "epoch 2 a", "epoch 2 b"]

    write(client, "trainer/abc", [(now_ms + 1, "epoch 2 c"), (now_ms + 2, "epoch 3")])
    classpath, kwargs = first.serialize()
    assert classpath.endswith("TrainiumEcsTaskTrigger") and kwargs["log_cursor_uri"] == cursor
    restarted = TrainiumEcsTaskTrigger(**kwargs)  # the triggerer restarted: a new trigger from the stored kwargs
    after: list[str] = []
    asyncio.run(_with_logs(aws_conn_id, restarted.watch().follower(after.append).fetch))
    assert after == ["epoch 2 c", "epoch 3"]


def test_restarted_batch_trigger_resumes_every_node(aws_conn_id, now_ms, tmp_path):
    client = logs_client(aws_conn_id)
    client.create_log_group(logGroupName=GROUP)
    for node in (0, 1):
        client.create_log_stream(logGroupName=GROUP, logStreamName=f"job/node-{node}")
        write(client, f"job/node-{node}", [(now_ms + i, f"n{node} step {i}") for i in range(3)])
    trigger = TrainiumBatchJobTrigger(
        handle={"backend": "batch", "job_id": "4c7a2d1e", "job_name": "j", "details": {}},
        deadline=time.time() + 600,
        aws_conn_id=aws_conn_id,
        region_name=MOTO_REGION,
        num_nodes=2,
        log_group=GROUP,
        log_cursor_uri=cursor_uri((tmp_path / "out").as_uri(), "4c7a2d1e"),
    )

    def node_logs(t: TrainiumBatchJobTrigger, seen: list[str]) -> NodeLogs:
        logs = NodeLogs(t.log_group, seen.append, LogCursor(t.log_cursor_uri, t.aws_conn_id))
        for node in (0, 1):
            logs.learn(node, f"job/node-{node}")
        return logs

    before: list[str] = []
    first = node_logs(trigger, before)
    asyncio.run(_with_logs(aws_conn_id, first.fetch))
    assert len(before) == 6

    for node in (0, 1):
        write(client, f"job/node-{node}", [(now_ms + 3, f"n{node} step 3")])
    after: list[str] = []
    restarted = node_logs(TrainiumBatchJobTrigger(**trigger.serialize()[1]), after)
    asyncio.run(_with_logs(aws_conn_id, restarted.fetch))
    assert after == ["[node 0] n0 step 3", "[node 1] n1 step 3"]


def test_without_a_cursor_location_a_new_trigger_starts_from_the_top(aws_conn_id, now_ms):
    client = logs_client(aws_conn_id)
    client.create_log_group(logGroupName=GROUP)
    client.create_log_stream(logGroupName=GROUP, logStreamName="s")
    write(client, "s", [(now_ms, "only line")])
    seen: list[str] = []
    for _ in range(2):
        trigger = ecs_trigger(aws_conn_id, "s", None)  # type: ignore[arg-type]
        asyncio.run(_with_logs(aws_conn_id, trigger.watch().follower(seen.append).fetch))
    assert seen == ["only line", "only line"]  # what the cursor location prevents
