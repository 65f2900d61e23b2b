"""Waiting for a job: not at all, in the worker, or in the triggerer, with the same watch either way.

``TrainiumJobOperator.execute`` chooses the way; ``JobWaitMixin`` holds each: ``submit_only`` returns the job id
at once (a ``TrainiumJobSensor`` waits later), ``ResumableJobMixin``'s hooks wait in the worker (the job id
survives a worker crash in ``task_state_store``), and ``execute_complete`` resumes the task with the trigger's
event. Both waits get the same budget (``compute.budget.watch_budget``: the mid-run stop) and the same CloudWatch
log cursor, a file under the job's output folder that keeps how far the log was read, so a restarted triggerer or
worker resumes it; on a watched backend both run its one watch loop, whose last status carries what the platform
billed, which the cost record then reads. Both end in the operator's ``finish``.

A worker-side wait that Airflow kills (SIGTERM, ``on_kill``) stops the job only when a person stopped the task
(``kill_stops_job``): when the scheduler reset the try because its own scheduler died, or a worker shuts down, the
job keeps running and the next try attaches to it by name, so an Airflow restart never pays for a second job.
Airflow lets the killed try run on for its SIGKILL grace, and a reset try may not hear of its reset before its
job ends. So each try claims the job in ``task_state_store`` (``claim_job``: its try number), and ``finish`` asks
before its first push whether the claim is still its own (``superseded_by``): a reset try's id is gone from Airflow,
so its read finds nothing, and a later try's claim holds another number. A superseded try ends there
(``superseded_error``) without recording a cost or pushing a result: the next try owns both, and two tries pushing
the same XCom at once fail the one that counts.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_trainium.compute.attach import Attached
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle, JobStatus, LogSink
    from airflow_provider_trainium.neuron.spec import JobSpec
    from airflow_provider_trainium.operators.prepared_job import PreparedJob

#: The states of a killed try in which a person stopped it (marked it failed or success, cleared it while running,
#: ended its run): its job stops with it. In any other (``None`` or ``scheduled``: the scheduler reset the try of a
#: scheduler that died; ``running``: the worker is shutting down) the next try attaches to the job.
#: Plain strings: ``airflow.sdk.TaskInstanceState`` is not in Airflow 3.0, the floor this provider supports.
STOPPED_BY_A_PERSON = frozenset({"failed", "success", "skipped", "upstream_failed", "removed", "restarting"})

#: How long ``on_kill`` asks Airflow for the try's state: Airflow sends SIGKILL 5 s after SIGTERM, and the answer
#: may never come (the database is down, or the killed thread held the supervisor channel).
STATE_QUESTION_TIMEOUT_S = 2.0

#: Airflow's defer timeout does not call ``on_kill``; the trigger's own deadline (which stops the job) must come
#: first, so the defer timeout (the wait's timeout plus this) only backs it up. The sensor's deferral too.
DEFER_GRACE = timedelta(minutes=5)

#: The ``task_state_store`` key under which the try that waits for the job holds its claim (its try number).
WAITING_TRY_KEY = "trainium_waiting_try"

#: The worker-side wait's result before ``poll_until_complete`` has one: for a job an earlier try already finished,
#: ``get_job_result`` asks ``on_success`` instead.
NO_RESULT: Any = object()


def superseded_error(handle: JobHandle, why: str) -> BaseException:
    """What ends a killed try whose job the next try attaches to: Airflow's own "terminated" (never retried; the
    try is no longer the task's), which Airflow 3.0 keeps in ``airflow.exceptions``."""
    try:
        from airflow.sdk.exceptions import AirflowTaskTerminated
    except ImportError:  # Airflow < 3.1
        from airflow.exceptions import AirflowTaskTerminated  # type: ignore[no-redef]  # the same class, 3.0's home

    return AirflowTaskTerminated(f"this try was killed ({why}); the next one attaches to job {handle.job_id}")


def claim_job(context: Context, timeout: timedelta) -> None:
    """Mark this try as the one whose result the job's end becomes, for as long as its wait may last; without a
    ``task_state_store`` (Airflow < 3.3) there is nothing to mark."""
    store = context.get("task_state_store")
    if store is not None:
        store.set(WAITING_TRY_KEY, context["ti"].try_number, retention=timeout + DEFER_GRACE)


def superseded_by(context: Context) -> str | None:
    """Why this try's claim on its job is no longer its own (``claim_job``), or None while it is, or when Airflow
    cannot say: no store, or no answer (the push that follows would meet the same Airflow)."""
    store = context.get("task_state_store")
    if store is None:
        return None
    try:
        claimed = store.get(WAITING_TRY_KEY)
    except Exception:  # noqa: BLE001 - no answer is not evidence of a later try
        return None
    mine = context["ti"].try_number
    if claimed == mine:
        return None
    if claimed is None:
        return f"Airflow no longer holds try {mine}"
    return f"try {claimed} now waits for the job"


def log_cursor(prepared: PreparedJob, handle: JobHandle) -> str | None:
    """Where the wait keeps how far it read the job's log, so a restarted triggerer or worker resumes it."""
    from airflow_provider_trainium.compute.cloudwatch import cursor_uri

    return cursor_uri(prepared.spec.output_uri, handle.job_id)


def kill_stops_job(ti: Any, timeout_s: float = STATE_QUESTION_TIMEOUT_S) -> tuple[bool, str]:
    """Whether a killed try's job should stop, and why: only when Airflow holds the try stopped by a person.

    The question runs in its own thread because ``on_kill`` runs in a signal handler, which may have interrupted
    the very call that holds the channel to the supervisor. No answer keeps the job: the kill then came from an
    Airflow that cannot reach its database, where no person can have stopped anything either.
    """
    answer: dict[str, Any] = {}

    def ask() -> None:
        try:
            key = ti.task_id if ti.map_index < 0 else f"{ti.task_id}_{ti.map_index}"
            states = ti.get_task_states(
                dag_id=ti.dag_id,
                task_ids=[ti.task_id],
                run_ids=[ti.run_id],
                map_index=None if ti.map_index < 0 else ti.map_index,
            )
            answer["state"] = states.get(ti.run_id, {}).get(key)
        except Exception as err:  # any failure to ask is "no answer"
            answer["error"] = err

    asking = threading.Thread(target=ask, name="trainium-kill-question", daemon=True)
    asking.start()
    asking.join(timeout_s)
    if "state" not in answer:
        return False, f"Airflow did not say why ({answer.get('error', f'no answer in {timeout_s:g} s')})"
    state = answer["state"]
    if state in STOPPED_BY_A_PERSON:
        return True, f"the task is now {state}"
    return False, f"the task is now {state or 'reset for another try'}"


def job_trigger(
    backend: ComputeBackend, prepared: PreparedJob, handle: JobHandle, timeout: timedelta, max_cost_usd: Any
) -> Any:
    """The trigger that waits for the job in the triggerer; it stops the job itself at ``timeout`` from now."""
    from airflow_provider_trainium.compute.budget import watch_budget

    deadline = time.time() + timeout.total_seconds()
    budget = watch_budget(max_cost_usd, prepared.spec)
    from airflow_provider_trainium.compute.base import WatchRequest

    return backend.trigger(WatchRequest(handle, deadline, budget, log_cursor(prepared, handle)))


def wait_in_worker(
    backend: ComputeBackend,
    prepared: PreparedJob,
    handle: JobHandle,
    timeout: timedelta,
    max_cost_usd: Any,
    log: LogSink,
) -> JobStatus:
    """The job's end, waited for in this process (a job that has already ended is not watched again)."""
    from airflow_provider_trainium.compute.budget import watch_budget

    status = backend.status(handle)
    if not status.state.terminal:
        budget = watch_budget(max_cost_usd, prepared.spec)
        status = backend.wait(handle, log, timeout.total_seconds(), budget, log_cursor(prepared, handle))
    return status


def status_after_trigger(
    backend: ComputeBackend, event: dict[str, Any], prepared: PreparedJob, handle: JobHandle, log: LogSink
) -> JobStatus:
    """The job's end as the trigger's ``event`` says it, once the log's tail past the cursor is in the task log:
    the trigger leaves that tail to the worker, since a finishing trigger's last lines can miss the task log."""
    from airflow_provider_trainium.compute.watch import drain_logs

    return drain_logs(backend, event, log, log_cursor(prepared, handle))


class JobWaitMixin:
    """The part of ``TrainiumJobOperator`` that waits for the job its try attached to, and hands its end to
    ``finish``."""

    #: Why Airflow killed this try while the job runs on for the next one (``on_kill``); None while it is the task's.
    _superseded: str | None = None

    if TYPE_CHECKING:  # what TrainiumJobOperator (and BaseOperator) give it
        max_cost_usd: float | str | None
        log: Any  # BaseOperator's logger (its type differs across the Airflow versions we support)
        _prepared: PreparedJob | None
        _result: Any
        _backend: ComputeBackend | None
        _handle: JobHandle | None
        _ti: Any

        def prepare(self, context: Context) -> PreparedJob: ...
        def backend_for(self, compute: str) -> ComputeBackend: ...
        def job_timeout(self) -> timedelta: ...
        def attach(self, context: Context, prepared: PreparedJob) -> Attached: ...
        def remember(self, context: Context, handle: JobHandle, log_streams: dict[str, str] | None = None) -> None: ...
        def finish(self, context: Context, spec: JobSpec, handle: JobHandle, status: JobStatus) -> Any: ...
        def on_success(self, context: Context, spec: JobSpec, handle: JobHandle) -> Any: ...

    def raise_if_superseded(self, context: Context, handle: JobHandle) -> None:
        """End a try that is no longer the task's before it pushes anything (the module's docstring says why):
        ``on_kill`` said so, or Airflow's store does for the claim this try made when it attached (``remember``)."""
        why = self._superseded or (superseded_by(context) if self._ti is not None else None)
        if why is not None:
            raise superseded_error(handle, why)

    def on_kill(self) -> None:
        """Stop the job only when a person stopped the task (``kill_stops_job``); otherwise the next try
        attaches to it."""
        if self._backend is None or self._handle is None or self._ti is None:
            return
        stop, why = kill_stops_job(self._ti)
        if not stop:
            self._superseded = why
            self.log.warning("task killed (%s): job %s keeps running for the next try", why, self._handle.job_id)
            return
        self.log.info("task killed (%s): cancelling job %s", why, self._handle.job_id)
        self._backend.cancel(self._handle, "Airflow task was killed")

    # -- not at all -------------------------------------------------------------------------------------
    def submit_only(self, context: Context, prepared: PreparedJob, backend: ComputeBackend) -> str:
        """``wait_for_completion=False``: the job an earlier try started, else a new one; its id is the result
        (the handle is the ``job`` XCom, where ``TrainiumJobSensor`` checks it against the task's own job)."""
        if not backend.defers:
            from airflow.providers.common.compat.sdk import AirflowFailException

            raise AirflowFailException(
                f"wait_for_completion=False needs a remote backend; {prepared.compute} compute runs the job in this "
                "task's own processes"
            )
        attached = self.attach(context, prepared)
        self.log.info("job %s submitted; a TrainiumJobSensor waits for it", attached.handle.job_id)
        return attached.handle.job_id

    # -- in the worker (ResumableJobMixin's hooks) --------------------------------------------------------
    def submit_job(self, context: Context) -> Any:
        return self.attach(context, self.prepare(context)).handle.to_dict()

    def get_job_status(self, external_id: Any, context: Context) -> str:
        from airflow_provider_trainium.compute.base import JobHandle

        backend = self.backend_for(self.prepare(context).compute)
        return backend.status(JobHandle.from_dict(external_id)).state.value

    def is_job_active(self, status: str) -> bool:
        from airflow_provider_trainium.compute.base import JobState

        return not JobState(status).terminal

    def is_job_succeeded(self, status: str) -> bool:
        from airflow_provider_trainium.compute.base import JobState

        return JobState(status) is JobState.SUCCEEDED

    def poll_until_complete(self, external_id: Any, context: Context) -> Any:
        from airflow_provider_trainium.compute.base import JobHandle

        prepared = self.prepare(context)
        backend = self.backend_for(prepared.compute)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        status = wait_in_worker(backend, prepared, handle, self.job_timeout(), self.max_cost_usd, self.log.info)
        self._result = self.finish(context, prepared.spec, handle, status)
        return self._result

    def get_job_result(self, external_id: Any, context: Context) -> Any:
        if self._result is not NO_RESULT:
            return self._result
        from airflow_provider_trainium.compute.base import JobHandle

        prepared = self.prepare(context)
        handle = JobHandle.from_dict(external_id)
        self.remember(context, handle)
        return self.on_success(context, prepared.spec, handle)

    # -- in the triggerer ---------------------------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any], prepared: dict[str, Any] | None = None) -> Any:
        """After the trigger: the job spec prepared before deferring, not a rebuilt one."""
        from airflow_provider_trainium.compute.base import JobHandle
        from airflow_provider_trainium.operators.prepared_job import PreparedJob

        if prepared is not None:
            self._prepared = PreparedJob.from_dict(prepared)
        job = self.prepare(context)  # only a deferral from before prepared jobs were carried rebuilds it
        handle = JobHandle.from_dict(event["handle"])
        self.remember(context, handle, event.get("log_streams"))  # pre_execute reset the link record
        status = status_after_trigger(self.backend_for(job.compute), event, job, handle, self.log.info)
        return self.finish(context, job.spec, handle, status)
