"""DescribeTasks entries, in the shapes ECS returns them, read as job states with usable reasons."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.ecs.status import task_status

ARN = "arn:aws:ecs:us-east-1:123456789012:task/trainium/0f1e2d3c4b5a"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium-training:2.31"


def stopped(stop_code: str | None, stopped_reason: str, exit_code: int | None, container_reason: str | None = None):
    container = {"name": "trainer", "image": IMAGE, "lastStatus": "STOPPED"}
    if exit_code is not None:
        container["exitCode"] = exit_code
    if container_reason:
        container["reason"] = container_reason
    task = {"taskArn": ARN, "lastStatus": "STOPPED", "desiredStatus": "STOPPED", "containers": [container]}
    if stop_code:
        task["stopCode"] = stop_code
    task["stoppedReason"] = stopped_reason
    return task


@pytest.mark.parametrize(("last", "state"), [("PROVISIONING", "PENDING"), ("PENDING", "PENDING"),
                                             ("RUNNING", "RUNNING"), ("DEACTIVATING", "RUNNING")])  # fmt: skip
def test_not_yet_stopped(last, state):
    assert task_status({"taskArn": ARN, "lastStatus": last, "containers": []}).state is JobState(state)


def test_essential_container_exit_zero_is_success():
    status = task_status(stopped("EssentialContainerExited", "Essential container in task exited", 0))
    assert status.state is JobState.SUCCEEDED and status.exit_code == 0


def test_out_of_memory_names_the_cause_and_exit_code():
    status = task_status(
        stopped(
            "EssentialContainerExited",
            "Essential container in task exited",
            137,
            "OutOfMemoryError: Container killed due to memory usage",
        )
    )
    assert status.state is JobState.FAILED and status.exit_code == 137
    assert status.reason == (
        "ECS task 0f1e2d3c4b5a: the training container ran out of memory "
        "(stopCode EssentialContainerExited: Essential container in task exited; "
        "container trainer exit code 137: OutOfMemoryError: Container killed due to memory usage)"
    )


def test_image_pull_failure_names_the_image():
    reason = f"CannotPullContainerError: pull image manifest has been retried 5 time(s): {IMAGE}: not found"
    status = task_status(stopped("TaskFailedToStart", reason, None))
    assert status.state is JobState.FAILED and status.exit_code is None
    assert f"the image {IMAGE} could not be pulled" in status.reason
    assert "stopCode TaskFailedToStart" in status.reason


def test_non_zero_exit_keeps_the_code_for_the_operator():
    status = task_status(stopped("EssentialContainerExited", "Essential container in task exited", 65))
    assert status.state is JobState.FAILED and status.exit_code == 65  # 65: bad input, not retried
    assert "the training container exited with code 65" in status.reason


def test_user_stop_is_a_cancellation():
    status = task_status(stopped("UserInitiated", "Airflow task was killed", 143))
    assert status.state is JobState.CANCELLED
    assert "stopped on request" in status.reason and "Airflow task was killed" in status.reason


def test_spot_interruption_is_a_failure_even_with_exit_zero():
    status = task_status(stopped("SpotInterruption", "Your Spot Task was interrupted.", 0))
    assert status.state is JobState.FAILED and "instance was taken away" in status.reason
