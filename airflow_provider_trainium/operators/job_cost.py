"""What a finished job cost, pushed as the task's ``trainium_cost`` XCom and logged.

The record comes from ``compute.cost.job_cost``: from the intervals the wait saw the platform bill, else from the
platform's own records. The bill is information: a cost that cannot be read is a warning, never the task's failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.base import JobHandle, JobStatus
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.job import TrainiumJobOperator


def read_cost(
    operator: TrainiumJobOperator, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus | None = None
) -> dict[str, Any] | None:
    """What ``operator``'s job cost (``compute.cost.job_cost``), or None, with a warning, when it could not be
    read."""
    from airflow_provider_trainium.compute.cost import job_cost
    from airflow_provider_trainium.neuron.pricing import prices_for

    try:
        backend = operator.backend_for(operator.prepare(context).compute)
        billed = status.billed_intervals if status is not None else None
        return job_cost(backend, handle, spec, prices=prices_for(operator.config()), billed=billed)
    except Exception as err:  # noqa: BLE001 - the bill is information; the job's result stands
        operator.log.warning("the cost of job %s could not be read: %s", handle.job_id, err)
        return None


def push_cost(operator: TrainiumJobOperator, context: Context, record: dict[str, Any] | None) -> dict[str, Any] | None:
    """Push a record that could be read as the ``trainium_cost`` XCom and log it; returns it."""
    from airflow_provider_trainium.compute.cost import cost_line

    if record is not None:
        context["ti"].xcom_push(key="trainium_cost", value=record)
        operator.log.info("%s", cost_line(record))
    return record
