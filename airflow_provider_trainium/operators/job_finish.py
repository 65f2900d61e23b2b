"""How a job that did not succeed fails its task: what the error says, and whether Airflow may retry it.

Bad input (the trainer's exit code ``EXIT_BAD_INPUT``) and a job stopped over its budget fail without retries: a
retry would fail the same way, or spend the same budget again. Anything else may be retried. ``TrainiumJobSensor``
words the failure of a job it waited for with ``failure_message`` too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow.providers.common.compat.sdk import AirflowException

    from airflow_provider_trainium.compute.base import JobHandle, JobStatus

EXIT_BAD_INPUT = boundary.EXIT_BAD_INPUT


def failure_message(handle: JobHandle, status: JobStatus) -> str:
    """What a task that waited on a job that did not succeed says: state, reason and the log's last lines."""
    message = f"job {handle.job_id} {status.state.value.lower()}: {status.reason}"
    tail = "\n".join(status.log_tail[-30:])
    return message + (f"\nlast lines:\n{tail}" if tail else "")


def job_failure(handle: JobHandle, status: JobStatus) -> AirflowException:
    """The exception that fails the task of a job that ended as ``status`` without succeeding."""
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    from airflow_provider_trainium.compute.budget import STOP_REASON as BUDGET_STOP_REASON

    message = failure_message(handle, status)
    if status.exit_code == EXIT_BAD_INPUT:
        return AirflowFailException(message + "\n(bad input: not retried)")
    if status.reason.startswith(BUDGET_STOP_REASON):
        # a retry would spend the same budget again: rerun it by hand with a higher max_cost_usd
        return AirflowFailException(message + "\n(over budget: not retried; a rerun resumes from checkpoints)")
    return AirflowException(message)
