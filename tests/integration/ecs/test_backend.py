"""EcsBackend against the moto server: register once, run, reattach, place, and refuse bad input early."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from airflow_provider_trainium.compute.base import JobHandle, JobState
from airflow_provider_trainium.compute.ecs.backend import EcsBackend, EcsInputError, EcsPlacementError
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.ecs.conftest import IMAGE, LOG_GROUP, CallCounter
from tests.integration.moto_quotas import set_ec2_quotas, trn_quota

NEVER_STOPS = {"progression": "manual", "times": 10_000}


def spec(**changes) -> JobSpec:
    base = {
        "name": "train",
        "entry_point": "trainium_trainer.mnist_mlp.train",
        "args": ("--epochs", "2"),
        "image": IMAGE,
    }
    return JobSpec(**{**base, **changes})


def ids(try_key: str = "manual__2026-01-01T00:00:00+00:00") -> tuple[str, dict[str, str]]:
    return job_name("mnist", "train", try_key), job_tags("mnist", "train", try_key)


def backend(world, **config) -> tuple[EcsBackend, CallCounter]:
    """A backend as a fresh worker process builds it, with a counter on its own ECS client."""
    ecs = EcsBackend(world.config(**config), poll_interval_seconds=0)
    return ecs, CallCounter(ecs.hook.conn)


def describe(world, arn: str) -> dict:
    return world.ecs.describe_tasks(cluster=world.cluster, tasks=[arn], include=["TAGS"])["tasks"][0]


def test_run_registers_the_definition_once_and_starts_the_node_zero_command(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    ecs_world.add_instance("trn1.2xlarge")
    ecs, counter = backend(ecs_world)
    name, tags = ids()
    job = spec(output_uri="s3://bucket/runs/mnist/train")

    handle = ecs.submit(job, name, tags)

    task = describe(ecs_world, handle.job_id)
    assert task["startedBy"] == name
    assert task["launchType"] == "EC2"
    (override,) = task["overrides"]["containerOverrides"]
    assert override["command"] == launcher_arguments(job)
    assert {"name": "TRAINIUM_OUTPUT_URI", "value": "s3://bucket/runs/mnist/train"} in override["environment"]
    definition = ecs_world.ecs.describe_task_definition(taskDefinition=task["taskDefinitionArn"])["taskDefinition"]
    (container,) = definition["containerDefinitions"]
    assert [d["hostPath"] for d in container["linuxParameters"]["devices"]] == ["/dev/neuron0"]
    assert definition["placementConstraints"][0]["expression"] == "attribute:ecs.instance-type == trn1.2xlarge"
    assert handle.details["log_stream"] == f"trainium/trainer/{handle.details['task_id']}"
    assert handle.details["log_group"] == LOG_GROUP
    assert ecs.status(handle).state is JobState.RUNNING

    ecs.cancel(handle, "test is done with it")
    stopped = describe(ecs_world, handle.job_id)
    assert stopped["lastStatus"] == "STOPPED" and stopped["stoppedReason"] == "test is done with it"

    # the next job on the same instance type reuses the task definition
    other = ecs.submit(job, *ids("manual__2026-01-02T00:00:00+00:00"))
    assert other.details["task_definition_arn"] == handle.details["task_definition_arn"]
    assert counter.count("RegisterTaskDefinition") == 1
    assert counter.count("RunTask") == 2


def retry_of_a_first_try(
    ecs_world, task_progress, progression: dict, then: Callable[[EcsBackend, JobHandle, str], None] | None = None
) -> tuple[EcsBackend, JobHandle]:
    """A first try submits on a trn1.2xlarge (``then`` does what else it did); a retry, as a fresh worker builds
    its backend, looks for the try's task: it must find that very task and run none. The retry's backend and
    what it found."""
    task_progress(progression)
    ecs_world.add_instance("trn1.2xlarge")
    first, _ = backend(ecs_world)
    name, tags = ids()
    started = first.submit(spec(), name, tags)
    if then is not None:
        then(first, started, name)

    retry, counter = backend(ecs_world)
    found = retry.find_existing(name, tags)

    assert found is not None and found.job_id == started.job_id
    assert counter.count("RunTask") == 0
    return retry, found


def test_a_second_attempt_attaches_to_the_running_task(ecs_world, task_progress):
    retry, found = retry_of_a_first_try(ecs_world, task_progress, NEVER_STOPS)
    assert retry.status(found).state is JobState.RUNNING
    assert retry.find_existing(*ids("manual__2026-01-02T00:00:00+00:00")) is None  # other runs are not ours


def test_a_second_attempt_finds_a_task_that_already_stopped(ecs_world, task_progress):
    """StopTask sets desiredStatus STOPPED: a RUNNING-only search (the amazon operator's) misses it."""

    def stopped(first: EcsBackend, started: JobHandle, name: str) -> None:
        first.cancel(started, "finished")
        running_only = ecs_world.ecs.list_tasks(cluster=ecs_world.cluster, startedBy=name, desiredStatus="RUNNING")
        assert running_only["taskArns"] == []

    retry, found = retry_of_a_first_try(ecs_world, task_progress, NEVER_STOPS, then=stopped)
    assert retry.status(found).state.terminal


def test_a_task_that_finished_on_its_own_is_found_and_succeeded(ecs_world, task_progress):
    # the task has ended by the time anyone looks
    retry, found = retry_of_a_first_try(ecs_world, task_progress, {"progression": "immediate"})
    assert retry.status(found).state is JobState.SUCCEEDED


def test_attach_prefers_the_running_task_over_an_earlier_stopped_one(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    ecs_world.add_instance("trn1.2xlarge")
    ecs, _ = backend(ecs_world)
    name, tags = ids()
    failed_try = ecs.submit(spec(), name, tags)
    ecs.cancel(failed_try, "first try failed")
    second_try = ecs.submit(spec(), name, tags)

    found = backend(ecs_world)[0].find_existing(name, tags)

    assert found is not None and found.job_id == second_try.job_id != failed_try.job_id


def test_placement_failure_is_reported_once_and_clearly(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    ecs_world.add_instance("trn1.2xlarge")  # a trn1.32xlarge task does not fit on it
    ecs, counter = backend(ecs_world)

    with pytest.raises(EcsPlacementError) as caught:
        ecs.submit(spec(instance_type="trn1.32xlarge"), *ids())

    message = str(caught.value)
    assert "could not place the trn1.32xlarge task in cluster 'trainium-test'" in message
    assert "16 Neuron device(s)" in message
    assert counter.count("RunTask") == 1


def test_capacity_provider_strategy_is_sent_instead_of_a_launch_type(ecs_world, task_progress):
    task_progress(NEVER_STOPS)
    ecs_world.add_instance("trn1.2xlarge")
    ecs, _ = backend(ecs_world, ecs_capacity_provider="trn1-2xlarge-asg")
    handle = ecs.submit(spec(), *ids())
    task = describe(ecs_world, handle.job_id)
    assert task.get("launchType", "") == ""
    assert task["capacityProviderName"] == "trn1-2xlarge-asg"


def test_unknown_cluster_fails_before_any_paid_call(ecs_world):
    ecs, counter = backend(ecs_world, ecs_cluster="no-such-cluster")
    with pytest.raises(EcsInputError, match="ECS cluster 'no-such-cluster' was not found"):
        ecs.find_existing(*ids())
    with pytest.raises(EcsInputError, match="no-such-cluster"):
        ecs.submit(spec(), *ids())
    assert counter.count("RunTask") == 0 and counter.count("RegisterTaskDefinition") == 0


def test_multi_node_and_missing_image_fail_before_any_paid_call(ecs_world):
    ecs_world.add_instance("trn1.32xlarge")
    ecs, counter = backend(ecs_world, image=None)
    with pytest.raises(EcsInputError, match=r"nodes=2: use compute='batch'"):
        ecs.submit(spec(instance_type="trn1.32xlarge", nodes=2), *ids())
    with pytest.raises(EcsInputError, match="no image"):
        ecs.submit(spec(image=None), *ids())
    assert counter.calls == []


def test_an_instance_above_the_trn_vcpu_quota_is_refused_before_run_task(ecs_world, monkeypatch):
    ecs_world.add_instance("trn1.32xlarge")
    set_ec2_quotas(monkeypatch, trn_quota(32))  # room for a trn1.2xlarge (8 vCPUs), not a trn1.32xlarge (128)
    ecs, counter = backend(ecs_world)
    with pytest.raises(EcsInputError, match="this layout can never be placed") as refused:
        ecs.submit(spec(instance_type="trn1.32xlarge"), *ids())
    assert "1 x trn1.32xlarge need 128 vCPUs" in str(refused.value) and "of 32 vCPUs" in str(refused.value)
    assert counter.count("RunTask") == 0 and counter.count("RegisterTaskDefinition") == 0


UNREACHABLE = [
    ({"artifact_root": "file:///srv/airflow/trainium"}, {}, "artifact_root (trainium connection) 'file:///srv"),
    ({}, {"output_uri": "/home/airflow/runs/1"}, "output_uri '/home/airflow/runs/1'"),
    ({}, {"checkpoint_uri": "file:///tmp/ckpt"}, "checkpoint_uri 'file:///tmp/ckpt'"),
    ({}, {"env": {"NEURON_COMPILE_CACHE_URL": "/var/cache"}}, "env NEURON_COMPILE_CACHE_URL '/var/cache'"),
]


def test_a_location_the_container_cannot_reach_fails_before_any_call(ecs_world):
    for config, changes, named in UNREACHABLE:
        ecs, counter = backend(ecs_world, **config)
        with pytest.raises(EcsInputError, match="is not an s3:// URI") as refused:
            ecs.submit(spec(**{"output_uri": "s3://bucket/runs/1", **changes}), *ids())
        assert named in str(refused.value) and "compute='ecs' runs the job on AWS" in str(refused.value)
        assert counter.calls == []
