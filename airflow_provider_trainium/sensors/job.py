"""``TrainiumJobSensor``: wait for the job a ``TrainiumJobOperator(wait_for_completion=False)`` task submitted.

The job is found as the operator's retries find it: by the name and tags derived from the submitting task
instance (its DAG, task, run and map index), never from an XCom alone. The submitting task's ``job`` XCom must
name the same job, or the sensor fails naming both, so an edited XCom cannot point the wait (or the stop at its
deadline) at another job. The wait is the operator's own: the backend's watch loop in the triggerer
(deferrable) or in the worker, with its log cursor under the sensor's own task prefix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseSensorOperator

from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID
from airflow_provider_trainium.operators.defaults import default_deferrable, wait_options
from airflow_provider_trainium.operators.job_wait import DEFER_GRACE

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus

DEFAULT_TIMEOUT = timedelta(hours=24)


class TrainiumJobSensor(BaseSensorOperator):
    """Succeeds when the job of task ``job_task_id`` (same run and map index) succeeds; returns its job id.

    :param job_task_id: the ``TrainiumJobOperator`` task that submitted with ``wait_for_completion=False``.
    :param deferrable: wait in the triggerer; default Airflow's ``[operators] default_deferrable``.
    :param poll_interval: seconds between status rounds (default: the backend's, 30 s).
    :param log_interval: seconds between reads of a Batch job's log streams (default 30 s).
    :param placement_timeout: seconds an ECS task may wait for an instance (default 1800).

    The wait ends at ``execution_timeout`` (default 24 h), when the job is stopped, as the operator's wait does;
    killing the task stops the job too.
    """

    template_fields: Sequence[str] = ("job_task_id",)
    ui_color = "#ffcc80"

    def __init__(
        self,
        *,
        job_task_id: str,
        trainium_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool | None = None,
        poll_interval: float | None = None,
        log_interval: float | None = None,
        placement_timeout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.job_task_id = job_task_id
        self.trainium_conn_id = trainium_conn_id
        self.deferrable = default_deferrable() if deferrable is None else deferrable
        self.poll_interval = poll_interval
        self.log_interval = log_interval
        self.placement_timeout = placement_timeout
        self._backend: ComputeBackend | None = None

    # -- which job ------------------------------------------------------------------------------------
    def backend(self, name: str) -> ComputeBackend:
        if self._backend is None or self._backend.name != name:
            from airflow_provider_trainium.compute.backends import backends, build_backend
            from airflow_provider_trainium.hooks.trainium import TrainiumHook

            if name not in backends():
                raise ValueError(f"task {self.job_task_id}'s job names backend {name!r}, which is not registered")
            options = wait_options(self.poll_interval, self.log_interval, self.placement_timeout)
            self._backend = build_backend(name, TrainiumHook(self.trainium_conn_id).get_config(), options)
        return self._backend

    def job(self, context: Context) -> JobHandle:
        """The submitting task instance's job, found by its name and tags; the ``job`` XCom must agree."""
        from airflow.providers.common.compat.sdk import AirflowFailException

        from airflow_provider_trainium.compute import naming
        from airflow_provider_trainium.compute.base import JobHandle

        ti = context["ti"]
        map_index = ti.map_index if ti.map_index is not None else -1
        pushed = ti.xcom_pull(task_ids=self.job_task_id, key="job", map_indexes=map_index)
        if not isinstance(pushed, dict) or not pushed.get("backend"):
            raise AirflowFailException(f"task {self.job_task_id} of this run has submitted no job (no job XCom)")
        try:
            backend = self.backend(str(pushed["backend"]))
        except ValueError as err:
            raise AirflowFailException(str(err)) from err
        if not backend.defers:
            raise AirflowFailException(f"task {self.job_task_id} ran on {backend.name} compute: nothing to wait for")
        name = naming.job_name(ti.dag_id, self.job_task_id, ti.run_id, map_index)
        found = backend.find_existing(name, naming.job_tags(ti.dag_id, self.job_task_id, ti.run_id, map_index))
        if found is None:
            raise AirflowFailException(f"{backend.name} has no job {name} of task {self.job_task_id} in this run")
        claimed = JobHandle.from_dict(pushed).job_id
        if claimed != found.job_id:
            raise AirflowFailException(
                f"task {self.job_task_id}'s job XCom names job {claimed}, but its job in {backend.name} is "
                f"{found.job_id}: the XCom was changed; not waiting on it"
            )
        return found

    def log_cursor(self, context: Context, handle: JobHandle) -> str | None:
        """The sensor's own cursor of the job's log, under its task instance's run prefix."""
        from airflow_provider_trainium.compute.cloudwatch import cursor_uri
        from airflow_provider_trainium.hooks.trainium import TrainiumHook
        from airflow_provider_trainium.operators.job import TrainiumJobOperator

        config = TrainiumHook(self.trainium_conn_id).get_config()
        return cursor_uri(TrainiumJobOperator.task_instance_prefix(context, config, "runs"), handle.job_id)

    def wait_timeout(self) -> timedelta:
        return self.execution_timeout or DEFAULT_TIMEOUT

    # -- waiting --------------------------------------------------------------------------------------
    def execute(self, context: Context) -> Any:
        handle = self.job(context)
        backend = self.backend(handle.backend)
        cursor = self.log_cursor(context, handle)
        if self.deferrable:
            from airflow_provider_trainium.compute.base import WatchRequest

            deadline = time.time() + self.wait_timeout().total_seconds()
            self.defer(
                trigger=backend.trigger(WatchRequest(handle, deadline, None, cursor)),
                method_name="execute_complete",
                timeout=self.wait_timeout() + DEFER_GRACE,
            )
        status = backend.wait(handle, self.log.info, self.wait_timeout().total_seconds(), None, cursor)
        return self.finish(handle, status)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        from airflow_provider_trainium.compute.base import JobHandle
        from airflow_provider_trainium.compute.watch import drain_logs

        handle = JobHandle.from_dict(event["handle"])
        backend = self.backend(handle.backend)
        status = drain_logs(backend, event, self.log.info, self.log_cursor(context, handle))
        return self.finish(handle, status)

    def finish(self, handle: JobHandle, status: JobStatus) -> str:
        from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

        from airflow_provider_trainium.compute.base import JobState
        from airflow_provider_trainium.operators.job_finish import EXIT_BAD_INPUT, failure_message

        if status.state is JobState.SUCCEEDED:
            self.log.info("job %s succeeded", handle.job_id)
            return handle.job_id
        message = failure_message(handle, status)
        if status.exit_code == EXIT_BAD_INPUT:
            raise AirflowFailException(message + "\n(bad input: not retried)")
        raise AirflowException(message)

    def poke(self, context: Context) -> bool:  # pragma: no cover - execute waits itself
        raise NotImplementedError("TrainiumJobSensor waits in execute, through the backend's watch loop")
