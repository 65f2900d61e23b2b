"""TrainiumJobOperator on compute=batch: a retry or a restarted worker never submits a second job."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from airflow_provider_trainium.compute import naming
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import CallCounter
from tests.task_instance import StateStore
from tests.task_instance import TaskInstanceStandIn as SharedTaskInstanceStandIn


@dataclass
class TaskInstanceStandIn(SharedTaskInstanceStandIn):
    """The allreduce smoke task's instance; ``pushed`` is set once the operator pushes its job."""

    dag_id: str = "trainium_allreduce_smoke"
    task_id: str = "allreduce"
    pushed: threading.Event = field(default_factory=threading.Event)

    def xcom_push(self, key: str, value: Any) -> None:
        super().xcom_push(key, value)
        if key == "job":
            self.pushed.set()


def operator(**kwargs: Any) -> TrainiumJobOperator:
    kwargs.setdefault("task_id", "allreduce")
    return TrainiumJobOperator(entry_point="trainium_trainer.allreduce", compute="batch", instance_type="trn1.32xlarge",
                               nodes=4, execution_timeout=timedelta(hours=1), **kwargs)  # fmt: skip


def context(ti: TaskInstanceStandIn, store: StateStore | None = None) -> dict[str, Any]:
    return {"ti": ti, "task_state_store": store}


def jobs_named(batch_env, ti: TaskInstanceStandIn) -> list[dict[str, Any]]:
    name = naming.job_name(ti.dag_id, ti.task_id, ti.run_id, ti.map_index)
    return batch_env.batch.list_jobs(jobQueue=batch_env.queue, filters=[{"name": "JOB_NAME", "values": [name]}])[
        "jobSummaryList"
    ]


def test_restarted_worker_attaches_to_the_running_job_without_submitting(batch_env):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred) as first:
        operator().execute(context(ti))
    job_id = first.value.trigger.handle["job_id"]
    moto_batch.hold_running(batch_env.region, [job_id])  # the worker dies while the job runs

    again = operator()
    prepared = again.prepare(context(ti))
    counter = CallCounter().attach(again.backend_for(prepared.compute).hook.client)
    attached = again.attach(context(ti), prepared)
    assert attached.handle.job_id == job_id and attached.status is not None
    assert attached.status.state.value == "RUNNING"
    assert counter["SubmitJob"] == 0 and counter["ListJobs"] == 1
    with pytest.raises(TaskDeferred) as second:
        again.execute(context(ti))
    assert second.value.trigger.handle["job_id"] == job_id
    assert len(jobs_named(batch_env, ti)) == 1
    assert second.value.timeout > timedelta(hours=1)  # the trigger's own deadline fires first
    link = ti.xcoms["trainium_links"]
    assert link["kind"] == "batch" and link["job_id"] == job_id and link["region_name"] == batch_env.region


def test_a_succeeded_job_is_not_rerun(batch_env):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred):
        operator().execute(context(ti))  # moto finishes the job at once
    assert operator().execute(context(ti)).startswith("s3://")  # returns the output URI, no deferral
    assert len(jobs_named(batch_env, ti)) == 1


def test_a_failed_job_is_submitted_again_on_retry(batch_env):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred) as first:
        operator().execute(context(ti))
    moto_batch.finish(batch_env.region, first.value.trigger.handle["job_id"], success=False, reason="oom")
    with pytest.raises(TaskDeferred) as second:
        operator().execute(context(ti))
    assert second.value.trigger.handle["job_id"] != first.value.trigger.handle["job_id"]
    assert len(jobs_named(batch_env, ti)) == 2


def test_sync_path_reconnects_through_the_task_state_store(batch_env):
    ti, store = TaskInstanceStandIn(), StateStore()
    first = operator(deferrable=False)
    job = first.submit_job(context(ti, store))  # what execute_resumable does before the worker dies mid-wait
    store.set(first.external_id_key, job)
    moto_batch.hold_running(batch_env.region, [job["job_id"]])
    ti.pushed.clear()

    def finish_when_attached() -> None:
        assert ti.pushed.wait(120)  # the second worker is waiting on the job it found
        moto_batch.finish(batch_env.region, job["job_id"], success=True)

    helper = threading.Thread(target=finish_when_attached)
    helper.start()
    result = operator(deferrable=False).execute(context(ti, store))
    helper.join()
    assert result.startswith("s3://") and ti.xcoms["job"]["job_id"] == job["job_id"]
    assert len(jobs_named(batch_env, ti)) == 1


def test_no_image_fails_before_anything_is_submitted(batch_env, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    from tests.conftest import set_trainium_connection

    set_trainium_connection(monkeypatch, aws_conn_id=batch_env.config.aws_conn_id, region_name=batch_env.region,
                            batch_job_queues={"trn1.32xlarge": batch_env.queue})  # fmt: skip
    ti = TaskInstanceStandIn()
    with pytest.raises(AirflowFailException, match="no image"):
        operator().execute(context(ti))
    assert jobs_named(batch_env, ti) == [] and ti.xcoms == {}
