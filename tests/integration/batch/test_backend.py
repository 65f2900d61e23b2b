"""The Batch backend against a moto server, through the Airflow AWS connection: register, submit, wait, kill."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobState, WatchRequest
from airflow_provider_trainium.compute.batch.poller import BatchJobPoller
from airflow_provider_trainium.compute.watch import first_event as compute_first_event
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE, CallCounter

TAGS = {"airflow:dag_id": "d", "airflow:task_id": "t", "airflow:run_id": "r1", "airflow:map_index": "-1"}


def spec(nodes: int = 4, instance_type: str = "trn1.32xlarge", **changes: Any) -> JobSpec:
    values = dict(name="train", entry_point="trainium_trainer.allreduce", instance_type=instance_type, nodes=nodes,
                  image=IMAGE, output_uri="s3://bucket/runs/1", timeout_seconds=3600)  # fmt: skip
    values.update(changes)
    return JobSpec(**values).validate()


async def watch_event(watch, on_log) -> dict[str, Any]:
    return (await compute_first_event(watch, on_log)).to_dict()


async def first_event(trigger) -> dict[str, Any]:
    async for event in trigger.run():
        return dict(event.payload)
    raise AssertionError("no event")


def test_register_twice_gives_one_definition(batch_env):
    backend = batch_env.backend()
    first = backend.submit(spec(), "job-a", TAGS)
    second = backend.submit(spec(output_uri="s3://bucket/runs/2"), "job-b", TAGS)
    assert first.details["job_definition"] == second.details["job_definition"]
    name = first.details["job_definition"].split("/")[-1].split(":")[0]
    found = batch_env.batch.describe_job_definitions(jobDefinitionName=name)["jobDefinitions"]
    assert [d["revision"] for d in found] == [1]
    assert found[0]["type"] == "multinode" and found[0]["status"] == "ACTIVE"


def test_submission_is_tagged_named_and_overridden(batch_env):
    handle = batch_env.backend().submit(spec(), "dag-task-abc123", TAGS)
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    assert job["jobName"] == "dag-task-abc123" and job["tags"] == {**TAGS, "trainium:spec-hash": spec().content_hash()}
    assert job["nodeProperties"]["numNodes"] == 4
    assert handle.details["num_nodes"] == 4 and handle.details["job_queue"] == batch_env.queue


def test_missing_queue_or_image_fails_before_any_call(batch_env):
    backend = batch_env.backend()
    counter = CallCounter().attach(backend.hook.client)
    with pytest.raises(ValueError, match="no image"):
        backend.submit(spec(image=None), "j", TAGS)
    backend.config = backend.config.__class__(**{**backend.config.__dict__, "batch_job_queues": {}})
    with pytest.raises(ValueError, match="no Batch job queue for trn1.32xlarge"):
        backend.submit(spec(), "j", TAGS)
    assert counter.calls == {}


def test_find_existing_returns_the_newest_job_with_the_same_name_and_tags(batch_env):
    backend = batch_env.backend()
    assert backend.find_existing("job-a", TAGS) is None
    old = backend.submit(spec(), "job-a", TAGS)
    moto_batch.finish(batch_env.region, old.job_id, success=False, reason="Essential container exited")
    time.sleep(0.002)  # createdAt has millisecond resolution: keep the two submissions apart
    new = backend.submit(spec(), "job-a", TAGS)
    backend.submit(spec(), "job-a", {**TAGS, "airflow:run_id": "other"})  # same name, another run: not ours
    found = backend.find_existing("job-a", TAGS)
    assert found is not None and found.job_id == new.job_id
    assert backend.status(found).state is JobState.SUCCEEDED


#: Poll rounds (0.2 s each) the every-node test lets the watch take to emit every node's line, and later to see
#: the job end. Round 1 describes the parent (no node streams yet: the watch asks for the node jobs), round 2
#: learns the node jobs' streams and starts reading them (log_interval 0); the read runs beside the next rounds,
#: so the lines show up from round 3 on (measured: 3 rounds; 2 fail). 25 rounds (~5 s) leave room for a read
#: slowed by a loaded machine; a watch that stops streaming fails here in seconds, not at the job's 600 s deadline.
STREAM_ROUNDS = 25


def test_trigger_streams_every_node_and_fires_success(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-a", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    streams = moto_batch.start_nodes(batch_env.region, handle.job_id, 4, batch_env.logs, batch_env.log_group)
    now_ms = int(time.time() * 1000)
    for node, stream in enumerate(streams):
        moto_batch.write_log(batch_env.logs, batch_env.log_group, stream, [f"hello from node {node}"], now_ms)
    # the job's deadline; the rounds below bound the test
    watch = backend.watch(WatchRequest(handle, time.time() + 600))
    lines: list[str] = []

    async def scenario() -> dict[str, Any]:
        task = asyncio.create_task(watch_event(watch, lines.append))
        poller = BatchJobPoller.shared(watch.aws_conn_id, watch.region_name, watch.poll_interval)
        rounds = 0
        while len(lines) < 4 and not task.done() and rounds < STREAM_ROUNDS:  # rounds, not wall time
            await poller.next_round()
            rounds += 1
        assert len(lines) == 4 and not task.done(), f"after {rounds} rounds: {lines}"
        for node, stream in enumerate(streams):
            moto_batch.write_log(batch_env.logs, batch_env.log_group, stream, [f"done on node {node}"], now_ms + 10)
        moto_batch.finish(batch_env.region, handle.job_id, success=True)
        rounds = 0
        while not task.done() and rounds < STREAM_ROUNDS:  # the next round sees it ended, then the tail is read
            await poller.next_round()
            rounds += 1
        assert task.done(), f"the watch saw no end in {rounds} rounds"
        return task.result()

    event = asyncio.run(scenario())
    assert event["state"] == "SUCCEEDED" and event["handle"]["job_id"] == handle.job_id
    assert event["log_streams"] == {str(i): s for i, s in enumerate(streams)}
    for node in range(4):
        assert f"[node {node}] hello from node {node}" in lines
        assert f"[node {node}] done on node {node}" in event["log_tail"]
    assert len(lines) == len(set(lines)) == 8  # every line once


def test_trigger_reports_failure_with_reason_and_exit_code(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(nodes=1, instance_type="trn1.2xlarge"), "job-f", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    moto_batch.finish(batch_env.region, handle.job_id, success=False, reason="Essential container exited", exit_code=65)
    event = asyncio.run(first_event(backend.trigger(WatchRequest(handle, time.time() + 600))))
    assert event["state"] == "FAILED" and event["exit_code"] == 65
    assert event["reason"] == "Essential container exited"


def test_deadline_terminates_the_job_and_fails(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-d", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])
    event = asyncio.run(first_event(backend.trigger(WatchRequest(handle, time.time() - 1))))
    assert event["state"] == "FAILED" and "deadline" in event["reason"]
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    assert job["statusReason"] == "Airflow: deadline passed"


def test_kill_terminates_the_job_but_a_triggerer_restart_does_not(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-k", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])

    async def wait_then_cancel(kill: bool) -> None:
        trigger = backend.trigger(WatchRequest(handle, time.time() + 600))
        task = asyncio.create_task(first_event(trigger))
        await BatchJobPoller.shared(trigger.aws_conn_id, trigger.region_name, trigger.poll_interval).next_round()
        task.cancel()  # the triggerer cancels the trigger in both cases...
        with pytest.raises(asyncio.CancelledError):
            await task
        await trigger.cleanup()
        if kill:  # ...and calls on_kill only when a user killed the task
            await trigger.on_kill()

    asyncio.run(wait_then_cancel(kill=False))
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    assert job["status"] == "RUNNING" and "statusReason" not in job
    asyncio.run(wait_then_cancel(kill=True))
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    assert job["statusReason"] == "Airflow: Airflow task was killed"
    assert moto_batch.job(batch_env.region, handle.job_id).stop is True


def test_worker_side_wait_runs_the_trigger_to_its_event(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(nodes=1, instance_type="trn1.2xlarge"), "job-w", TAGS)
    status = backend.wait(handle, lambda line: None, 600)
    assert status.state is JobState.SUCCEEDED
