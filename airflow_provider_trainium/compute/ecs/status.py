"""Read an ECS task (one entry of DescribeTasks) as a JobStatus with a reason a person can act on.

The facts are spread over the task (``stopCode``, ``stoppedReason``) and the training container
(``exitCode``, ``reason``); the message puts them together and names the usual causes: out of memory,
an image that could not be pulled, the container exiting non-zero, a stop requested by a user.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.base import JobState, JobStatus
from airflow_provider_trainium.compute.ecs.definitions import CONTAINER_NAME

NOT_STARTED = frozenset({"PROVISIONING", "PENDING", "ACTIVATING"})
#: Statuses on the way down (DEACTIVATING, STOPPING, DEPROVISIONING) still count as running.
STOPPED = "STOPPED"


def task_id(task_arn: str) -> str:
    return task_arn.rsplit("/", 1)[-1]


def training_container(task: dict[str, Any], name: str = CONTAINER_NAME) -> dict[str, Any]:
    containers: list[dict[str, Any]] = task.get("containers") or []
    for container in containers:
        if container.get("name") == name:
            return container
    return containers[0] if containers else {}


def _cause(task: dict[str, Any], container: dict[str, Any]) -> str:
    """A short headline for why the task stopped."""
    stop_code = task.get("stopCode") or ""
    texts = " ".join(str(x) for x in (container.get("reason"), task.get("stoppedReason")) if x)
    exit_code = container.get("exitCode")
    if "OutOfMemory" in texts:
        return "the training container ran out of memory"
    if "CannotPullContainer" in texts:
        image = container.get("image")
        return f"the image {image} could not be pulled" if image else "the image could not be pulled"
    if stop_code == "UserInitiated":
        return "the task was stopped on request"
    if stop_code in ("SpotInterruption", "TerminationNotice"):
        return "the instance was taken away"
    if stop_code == "TaskFailedToStart":
        return "the task failed to start"
    if exit_code is not None and exit_code != 0:
        return f"the training container exited with code {exit_code}"
    if exit_code is None:
        return "the training container did not report an exit code"
    return "the task stopped"


def stop_description(task: dict[str, Any]) -> str:
    """``<cause> (stopCode X: stoppedReason; container <name> exit code N: reason)``."""
    container = training_container(task)
    details = []
    if task.get("stopCode") or task.get("stoppedReason"):
        details.append(f"stopCode {task.get('stopCode') or '-'}: {task.get('stoppedReason') or '-'}")
    if container:
        part = f"container {container.get('name')} exit code {container.get('exitCode')}"
        if container.get("reason"):
            part += f": {container['reason']}"
        details.append(part)
    head = f"ECS task {task_id(task.get('taskArn', ''))}: {_cause(task, container)}"
    return f"{head} ({'; '.join(details)})" if details else head


def task_status(task: dict[str, Any]) -> JobStatus:
    last = task.get("lastStatus") or "PROVISIONING"
    if last in NOT_STARTED:
        return JobStatus(JobState.PENDING, reason=last)
    if last != STOPPED:
        return JobStatus(JobState.RUNNING, reason=last)
    container = training_container(task)
    exit_code = container.get("exitCode")
    if task.get("stopCode") == "UserInitiated":
        return JobStatus(JobState.CANCELLED, reason=stop_description(task), exit_code=exit_code)
    if exit_code == 0 and task.get("stopCode") in (None, "", "EssentialContainerExited"):
        return JobStatus(JobState.SUCCEEDED, reason="", exit_code=0)
    return JobStatus(JobState.FAILED, reason=stop_description(task), exit_code=exit_code)
