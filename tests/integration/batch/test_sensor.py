"""``wait_for_completion=False`` submits (or attaches) and returns the job id; ``TrainiumJobSensor`` waits for
that job later, found by the submitting task instance's name and tags, against the moto server."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import pytest

from airflow_provider_trainium.compute import naming
from airflow_provider_trainium.sensors.job import TrainiumJobSensor
from tests.dag_runs import states
from tests.integration.batch import moto_batch
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, jobs_named, operator
from tests.integration.batch.test_retry_dag import register

DAG_ID = "trainium_batch_submit_then_wait"


@dataclass
class SensorTaskInstance(TaskInstanceStandIn):
    """The sensor's task instance: same run as the submitting one; reads that task's XComs."""

    task_id: str = "wait"
    upstream: TaskInstanceStandIn | None = None

    def xcom_pull(self, task_ids: str, key: str, map_indexes: int = -1) -> Any:
        assert self.upstream is not None
        assert (task_ids, map_indexes) == (self.upstream.task_id, self.upstream.map_index)
        return self.upstream.xcoms.get(key)


def sensor(**kwargs: Any) -> TrainiumJobSensor:
    return TrainiumJobSensor(task_id="wait", job_task_id="allreduce", poll_interval=0.2, log_interval=0, **kwargs)


def test_submit_only_returns_the_job_id_and_a_retry_attaches_to_the_same_job(batch_env):
    ti = TaskInstanceStandIn()
    job_id = operator(wait_for_completion=False).execute(context(ti))
    assert job_id == ti.xcoms["job"]["job_id"]
    assert operator(wait_for_completion=False).execute(context(ti)) == job_id  # a retry submits nothing
    assert [s["jobId"] for s in jobs_named(batch_env, ti)] == [job_id]


def test_the_sensor_defers_on_the_submitted_job_and_refuses_an_xcom_naming_another(batch_env):
    from airflow.providers.common.compat.sdk import AirflowFailException
    from airflow.sdk.exceptions import TaskDeferred

    submitting = TaskInstanceStandIn()
    job_id = operator(wait_for_completion=False).execute(context(submitting))
    moto_batch.hold_running(batch_env.region, [job_id])
    waiting = SensorTaskInstance(upstream=submitting)
    with pytest.raises(TaskDeferred) as deferred:
        sensor(deferrable=True).execute(context(waiting))
    assert deferred.value.trigger.handle["job_id"] == job_id
    assert deferred.value.trigger.poll_interval == 0.2

    other = operator(wait_for_completion=False, task_id="other").execute(context(TaskInstanceStandIn(task_id="other")))
    submitting.xcoms["job"] = {**submitting.xcoms["job"], "job_id": other}  # a user rewrote the XCom
    with pytest.raises(AirflowFailException, match="the XCom was changed") as refused:
        sensor().execute(context(waiting))
    assert other in str(refused.value) and job_id in str(refused.value)


def test_a_task_without_a_job_is_named(batch_env):
    from airflow.providers.common.compat.sdk import AirflowFailException

    waiting = SensorTaskInstance(upstream=TaskInstanceStandIn())
    with pytest.raises(AirflowFailException, match="task allreduce of this run has submitted no job"):
        sensor().execute(context(waiting))


def submit_then_wait_dag():
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    with DAG(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        submit = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.allreduce", compute="batch",
                                     instance_type="trn1.32xlarge", nodes=2, wait_for_completion=False,
                                     execution_timeout=timedelta(minutes=10))  # fmt: skip
        wait = TrainiumJobSensor(task_id="wait", job_task_id="train", poll_interval=0.2, log_interval=0,
                                 execution_timeout=timedelta(minutes=10))  # fmt: skip
        submit >> wait
    register(dag)
    return dag


@pytest.mark.slow
def test_submit_then_sensor_finishes_a_batch_job_with_exactly_one_submit_job(batch_env):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    run = submit_then_wait_dag().test()

    assert states(run) == {"train": "success", "wait": "success"}
    name = naming.job_name(DAG_ID, "train", run.run_id)
    summaries = batch_env.batch.list_jobs(jobQueue=batch_env.queue, filters=[{"name": "JOB_NAME", "values": [name]}])
    (job,) = summaries["jobSummaryList"]  # exactly one SubmitJob for the submit task and the sensor together
    assert job["status"] == "SUCCEEDED"
    with create_session() as session:
        values = {x.task_id: x.value for x in session.query(XComModel).filter_by(dag_id=DAG_ID, run_id=run.run_id,
                                                                                  key="return_value")}  # fmt: skip
    assert values == {"train": job["jobId"], "wait": job["jobId"]}
