"""A restarted wait resumes each CloudWatch stream where the last one stopped: no line twice, none lost.

The triggers read the moto server's CloudWatch Logs; the "restart" drops the trigger mid-stream and builds
a new one from its serialized kwargs, as a triggerer does after it restarts (also from a row stored before
triggers serialized their watch loop). A worker-side wait (``deferrable=False``) keeps the same cursor, so a
task that waits in the worker after a deferred try resumes the log there too.
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_trainium.compute.cloudwatch import LogCursor, NodeLogs, cursor_uri
from airflow_provider_trainium.compute.watch import watch_kwargs
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger
from tests.conftest import MOTO_REGION
from tests.task_instance import TaskInstanceStandIn

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
    return TrainiumEcsTaskTrigger(
        handle=handle,
        deadline=time.time() + 600,
        aws_conn_id=aws_conn_id,
        region_name=MOTO_REGION,
        log_cursor_uri=cursor,
    )


@pytest.fixture
def now_ms() -> int:
    return int(time.time() * 1000) - 60_000


@pytest.mark.parametrize("row", ["watch", "fields as kwargs"])
def test_restarted_ecs_trigger_emits_no_line_twice(aws_conn_id, now_ms, row):
    client = logs_client(aws_conn_id)
    client.create_log_group(logGroupName=GROUP)
    client.create_log_stream(logGroupName=GROUP, logStreamName="trainium_trainer/abc")
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    S3Hook(aws_conn_id=aws_conn_id).get_conn().create_bucket(Bucket="artifacts")
    cursor = cursor_uri("s3://artifacts/runs/mnist/r1/train", "arn:aws:ecs:us-east-1:1:task/trainium/abc")
    # two lines share a timestamp across the restart: the cursor counts them
    write(client, "trainium_trainer/abc", [(now_ms, "epoch 1"), (now_ms + 1, "epoch 2 a"), (now_ms + 1, "epoch 2 b")])

    first = ecs_trigger(aws_conn_id, "trainium_trainer/abc", cursor)
    before: list[str] = []
    asyncio.run(_with_logs(aws_conn_id, first.watch().follower(before.append).fetch))
    assert before == ["epoch 1", "epoch 2 a", "epoch 2 b"]

    write(client, "trainium_trainer/abc", [(now_ms + 1, "epoch 2 c"), (now_ms + 2, "epoch 3")])
    classpath, kwargs = first.serialize()
    assert classpath.endswith("TrainiumEcsTaskTrigger") and kwargs["watch"]["log_cursor_uri"] == cursor
    if row == "fields as kwargs":  # what a triggerer stored before triggers serialized their watch loop
        kwargs = watch_kwargs(first.watch())
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
        watch = t.watch()
        logs = NodeLogs(watch.log_group, seen.append, LogCursor(watch.log_cursor_uri, watch.aws_conn_id))
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


def job_operator(deferrable: bool) -> Any:
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    return TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs",
                               instance_type="trn1.2xlarge", execution_timeout=timedelta(hours=1),
                               deferrable=deferrable, poll_interval=1)  # fmt: skip


def test_a_worker_side_wait_resumes_the_log_where_the_trigger_stopped(ecs_world, task_progress, monkeypatch, capfd):
    """A deferred try's trigger read two lines, then the task waited in the worker: only the third is new."""
    from airflow.sdk.exceptions import TaskDeferred

    from tests.integration.ecs.conftest import connect_trainium

    task_progress({"progression": "manual", "times": 10_000})  # it runs until the test lets it stop
    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    ti = TaskInstanceStandIn(dag_id="mnist", task_id="train")
    first_try = job_operator(deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        first_try.execute({"ti": ti})
    watch = deferred.value.trigger.watch()
    stream = watch.handle["details"]["log_stream"]
    ecs_world.write_log(stream, ["epoch 1", "epoch 2"])
    before: list[str] = []
    asyncio.run(_with_logs(ecs_world.aws_conn_id, watch.follower(before.append).fetch))
    assert before == ["epoch 1", "epoch 2"] and watch.log_cursor_uri

    ecs_world.write_log(stream, ["epoch 3"])
    task_progress({"progression": "manual", "times": 1})  # from here it stops within a few polls
    capfd.readouterr()
    output = job_operator(deferrable=False).execute({"ti": ti})  # attaches to the running task and waits here

    logged = capfd.readouterr().out
    assert output == first_try.prepare({"ti": ti}).spec.output_uri  # the job succeeded
    assert "epoch 3" in logged and "epoch 1" not in logged and "epoch 2" not in logged
