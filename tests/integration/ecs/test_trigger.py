"""The ECS watch loop and its trigger shell against the moto server: logs, end states, deadline, on_kill."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

from airflow_provider_trainium.compute.base import JobState, WatchRequest
from airflow_provider_trainium.compute.ecs.backend import EcsBackend
from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.compute.watch import first_event as watch_event
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger
from tests.integration.ecs.conftest import IMAGE

NEVER_STOPS = {"progression": "manual", "times": 10_000}
SPEC = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=IMAGE)


def start(world) -> tuple[EcsBackend, Any]:
    world.add_instance("trn1.2xlarge")
    backend = EcsBackend(world.config(), poll_interval_seconds=0)
    run_id = "manual__2026-01-01T00:00:00+00:00"
    return backend, backend.submit(SPEC, job_name("mnist", "train", run_id), job_tags("mnist", "train", run_id))


def first_event(trigger: TrainiumEcsTaskTrigger) -> dict[str, Any]:
    async def run() -> dict[str, Any]:
        async for event in trigger.run():
            return event.payload
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(run())


def last_status(world, arn: str) -> dict[str, Any]:
    return world.ecs.describe_tasks(cluster=world.cluster, tasks=[arn])["tasks"][0]


def test_streams_the_log_and_fires_once_the_task_stops(ecs_world, task_progress):
    task_progress({"progression": "manual", "times": 1})  # four polls from RUNNING to STOPPED
    backend, handle = start(ecs_world)
    ecs_world.write_log(handle.details["log_stream"], ["epoch 1 loss 0.52", "epoch 2 loss 0.31"])
    watch = backend.watch(WatchRequest(handle, deadline=time.time() + 3600))
    seen: list[str] = []

    event = asyncio.run(watch_event(watch, seen.append)).to_dict()

    assert event["state"] == JobState.SUCCEEDED.value and event["exit_code"] == 0
    assert event["handle"] == handle.to_dict()
    assert event["log_tail"] == ["epoch 1 loss 0.52", "epoch 2 loss 0.31"]
    assert seen == ["epoch 1 loss 0.52", "epoch 2 loss 0.31"]  # each line once, across several polls
    assert last_status(ecs_world, handle.job_id)["lastStatus"] == "STOPPED"


def test_deadline_stops_the_task_and_fails(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    backend, handle = start(ecs_world)

    event = first_event(backend.trigger(WatchRequest(handle, deadline=time.time() - 1)))

    assert event["state"] == JobState.FAILED.value
    assert "deadline" in event["reason"]
    task = last_status(ecs_world, handle.job_id)
    assert task["lastStatus"] == "STOPPED" and task["stoppedReason"] == "Airflow task deadline passed"


def test_on_kill_stops_the_task_and_cleanup_does_not(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    backend, handle = start(ecs_world)
    trigger = backend.trigger(WatchRequest(handle, deadline=time.time() + 3600))

    asyncio.run(trigger.cleanup())
    assert last_status(ecs_world, handle.job_id)["lastStatus"] == "RUNNING"
    asyncio.run(trigger.on_kill())
    task = last_status(ecs_world, handle.job_id)
    assert task["lastStatus"] == "STOPPED" and task["stoppedReason"] == "Airflow task was killed"


def test_serialises_to_an_equal_trigger(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    backend, handle = start(ecs_world)
    trigger = backend.trigger(WatchRequest(handle, deadline=1_900_000_000.0))
    path, kwargs = trigger.serialize()
    module, name = path.rsplit(".", 1)
    again = getattr(importlib.import_module(module), name)(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert kwargs["watch"]["handle"]["details"]["cluster"] == ecs_world.cluster
    assert kwargs["watch"]["aws_conn_id"] == ecs_world.aws_conn_id


def test_worker_path_waits_with_the_same_loop(ecs_world, task_progress):
    task_progress({"progression": "manual", "times": 1})
    backend, handle = start(ecs_world)
    ecs_world.write_log(handle.details["log_stream"], ["done"])
    lines: list[str] = []
    status = backend.wait(handle, lines.append, timeout_seconds=600)
    assert status.state is JobState.SUCCEEDED and status.log_tail == ("done",) and lines == ["done"]


def test_a_task_that_never_starts_is_stopped_after_the_placement_timeout():
    watch = EcsTaskWatch(handle={"job_id": "arn", "details": {}}, deadline=0, aws_conn_id=None,
                         placement_timeout=600)  # fmt: skip
    now = 1_800_000_000.0
    waiting = {"lastStatus": "PROVISIONING", "createdAt": now - 601}
    assert watch.placement_expired(waiting, now)
    assert not watch.placement_expired({**waiting, "createdAt": now - 599}, now)
    assert not watch.placement_expired({**waiting, "lastStatus": "RUNNING"}, now)
