"""How to read an AWS Batch job description: its state, exit code, node jobs, log stream and start time.

The backend, its watch loop and the links all ask this module, so the vocabulary lives in one place.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.base import JobState

PENDING_STATUSES = frozenset({"SUBMITTED", "PENDING", "RUNNABLE", "STARTING"})
#: TerminateJob reasons we set start with this, so a terminated job reads as cancelled, not failed.
CANCEL_PREFIX = "Airflow: "
DEFAULT_LOG_GROUP = "/aws/batch/job"


def batch_state(job: dict[str, Any]) -> JobState:
    status = job.get("status", "")
    if status == "SUCCEEDED":
        return JobState.SUCCEEDED
    if status == "FAILED":
        if str(job.get("statusReason", "")).startswith(CANCEL_PREFIX):
            return JobState.CANCELLED
        return JobState.FAILED
    if status == "RUNNING":
        return JobState.RUNNING
    return JobState.PENDING


def exit_code(job: dict[str, Any]) -> int | None:
    code = (job.get("container") or {}).get("exitCode")
    if code is None and job.get("attempts"):
        code = (job["attempts"][-1].get("container") or {}).get("exitCode")
    return None if code is None else int(code)


def node_job_ids(job_id: str, num_nodes: int) -> list[str]:
    """Batch names the node jobs of a multi-node parallel job ``<job id>#<node index>``."""
    return [f"{job_id}#{i}" for i in range(num_nodes)]


def log_stream(job: dict[str, Any] | None) -> str | None:
    if not job:
        return None
    stream = (job.get("container") or {}).get("logStreamName")
    if not stream and job.get("attempts"):
        stream = (job["attempts"][-1].get("container") or {}).get("logStreamName")
    return stream or None


def started_at(job: dict[str, Any] | None) -> float | None:
    """Epoch seconds the job (or its latest attempt) started running; Batch reports milliseconds."""
    if not job:
        return None
    value = job.get("startedAt")
    if value is None and job.get("attempts"):
        value = job["attempts"][-1].get("startedAt")
    return None if value is None else float(value) / 1000.0
