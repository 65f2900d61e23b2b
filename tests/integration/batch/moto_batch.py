"""Drives moto's AWS Batch the way the real service would, for tests and the polling benchmark.

moto's Batch without Docker marks every job SUCCEEDED inside SubmitJob. To wait on a job that is still
running (a retry attaching to it, a user killing it, K jobs polled together), these helpers move a job
through its lifecycle in the moto server's own backend, as the Batch scheduler does in AWS: RUNNING, node
jobs ``<id>#<i>`` with their log streams, then SUCCEEDED or FAILED with a reason and an exit code.
The code under test only ever sees moto through its HTTP API.
"""

from __future__ import annotations

import contextlib
from typing import Any

ACCOUNT = "123456789012"


def create_queue(client: Any, iam: Any, name: str = "trn-queue") -> str:
    """An unmanaged compute environment and a job queue on it; returns the queue's name."""
    role = iam.create_role(RoleName=f"{name}-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    env = client.create_compute_environment(
        computeEnvironmentName=f"{name}-env", type="UNMANAGED", state="ENABLED", serviceRole=role
    )
    client.create_job_queue(
        jobQueueName=name,
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env["computeEnvironmentArn"]}],
    )
    return name


def keep_running(self: Any, include_start_attempt: bool, job: Any) -> None:
    """Stands in for ``BatchSimpleBackend._mark_job_as_finished``: what AWS Batch does after SubmitJob, the job
    starts and runs until it is finished (moto's simple Batch would mark it SUCCEEDED inside SubmitJob)."""
    import datetime

    self.backend._jobs[job.job_id] = job
    job.job_started_at = datetime.datetime.now()
    job.log_stream_name = job._stream_name
    if include_start_attempt:
        job._start_attempt()
    job.status = "RUNNING"


def _backend(region: str) -> Any:
    from moto.batch.models import batch_backends

    return batch_backends[ACCOUNT][region]


def job(region: str, job_id: str) -> Any:
    return _backend(region)._jobs[job_id]


def hold_running(region: str, job_ids: list[str]) -> None:
    """The job started and runs until :func:`finish` (undoing moto's instant success)."""
    for job_id in job_ids:
        j = job(region, job_id)
        j.job_stopped = False
        j.exit_code = None
        j.job_stopped_reason = None
        j.status = "RUNNING"


def finish(region: str, job_id: str, *, success: bool, reason: str | None = None, exit_code: int = 0) -> None:
    j = job(region, job_id)
    j.job_stopped = False
    j.exit_code = exit_code
    if reason is not None:
        j.job_stopped_reason = reason
    j._mark_stopped(success=success)
    if j.latest_attempt:  # AWS reports each attempt's exit code; moto's describe leaves it out
        j.latest_attempt["container"]["exitCode"] = exit_code
    for index in range(len(getattr(j, "_trainium_nodes", []))):
        node = job(region, f"{job_id}#{index}")
        node.job_stopped = False
        node.exit_code = exit_code
        node._mark_stopped(success=success)


def start_nodes(region: str, job_id: str, num_nodes: int, logs_client: Any, log_group: str) -> list[str]:
    """Node jobs ``<id>#<i>``, RUNNING, each with its own CloudWatch stream; returns the stream names."""
    from moto.batch.models import Job

    parent = job(region, job_id)
    backend = _backend(region)
    streams = []
    for index in range(num_nodes):
        node = Job(
            parent.job_name,
            parent.job_definition,
            parent.job_queue,
            backend,
            log_backend=backend.logs_backend,
            container_overrides=None,
            eks_properties_override=None,
            depends_on=None,
            parameters=None,
            all_jobs=backend._jobs,
            timeout=None,
            array_properties={},
            provided_job_id=f"{job_id}#{index}",
        )
        parent.job_queue.jobs.remove(node)  # node jobs are not listed in the queue
        node.log_stream_name = f"{parent.job_definition.name}/default/node{index}-{job_id[:8]}"
        node.job_started_at = parent.job_started_at
        node._start_attempt()
        node.status = "RUNNING"
        backend._jobs[node.job_id] = node
        streams.append(node.log_stream_name)
        with contextlib.suppress(logs_client.exceptions.ResourceAlreadyExistsException):
            logs_client.create_log_group(logGroupName=log_group)
        logs_client.create_log_stream(logGroupName=log_group, logStreamName=node.log_stream_name)
    parent._trainium_nodes = streams
    return streams


def write_log(logs_client: Any, log_group: str, stream: str, lines: list[str], start_ms: int) -> None:
    """What a container's awslogs driver does: put its lines into its stream."""
    logs_client.put_log_events(
        logGroupName=log_group,
        logStreamName=stream,
        logEvents=[{"timestamp": start_ms + i, "message": line} for i, line in enumerate(lines)],
    )
