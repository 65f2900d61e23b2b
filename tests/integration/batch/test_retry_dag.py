"""A Batch job task retried in a real ``dag.test()`` against the moto server: one new job per failed try.

moto's Batch (without Docker) ends every job inside SubmitJob: SUCCEEDED, or FAILED when the server's
``MOTO_SIMPLE_BATCH_FAIL_AFTER`` setting is present. The first try's job fails; the retry callback lifts
that setting, and the second try must find the failed job by name and tags, submit exactly one new job,
and succeed. Everything the test reads goes through moto's HTTP API.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

import pytest

from airflow_provider_trainium.compute import naming
from tests.dag_runs import states

DAG_ID = "trainium_batch_retry"
TASK_ID = "allreduce"


def retry_dag():
    from airflow.sdk import DAG

    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    class QuickPollJobOperator(TrainiumJobOperator):
        """The shipped operator; its Batch backend polls every 0.2 s instead of 30 s, so the test takes seconds."""

        def backend_for(self, compute):
            backend = super().backend_for(compute)
            backend.poll_interval = backend.log_interval = 0.2
            return backend

    def fix_the_cluster(context) -> None:  # what an operator does between tries: the next job can succeed
        os.environ.pop("MOTO_SIMPLE_BATCH_FAIL_AFTER", None)

    with DAG(DAG_ID, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
        QuickPollJobOperator(
            task_id=TASK_ID,
            entry_point="trainium_trainer.allreduce",
            compute="batch",
            instance_type="trn1.32xlarge",
            nodes=2,
            retries=1,
            retry_delay=timedelta(0),
            on_retry_callback=fix_the_cluster,
            execution_timeout=timedelta(minutes=10),
        )
    register(dag)
    return dag


def register(dag) -> None:
    """Write a DAG built in the test into the metadata DB, as the DAG processor does for a DAG file."""
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import DagBag, sync_bag_to_db

    DagBundlesManager().sync_bundles_to_db()  # the `dags-folder` bundle row, which a fresh Airflow home lacks
    bag = DagBag(dag_folder=os.devnull)
    bag.bag_dag(dag)
    sync_bag_to_db(bag, "dags-folder", None)


def try_number(run) -> int:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        ti = session.query(TaskInstance).filter_by(dag_id=DAG_ID, run_id=run.run_id, task_id=TASK_ID).one()
        return ti.try_number


@pytest.mark.slow
def test_a_failed_job_is_submitted_once_more_on_retry_and_the_retry_succeeds(batch_env, monkeypatch):
    monkeypatch.setenv("MOTO_SIMPLE_BATCH_FAIL_AFTER", "0")

    run = retry_dag().test()

    assert states(run) == {TASK_ID: "success"}
    assert try_number(run) == 2
    name = naming.job_name(DAG_ID, TASK_ID, run.run_id)
    summaries = batch_env.batch.list_jobs(jobQueue=batch_env.queue, filters=[{"name": "JOB_NAME", "values": [name]}])
    jobs = batch_env.batch.describe_jobs(jobs=[s["jobId"] for s in summaries["jobSummaryList"]])["jobs"]
    assert sorted(j["status"] for j in jobs) == ["FAILED", "SUCCEEDED"]  # one job per try, never two
    tags = naming.job_tags(DAG_ID, TASK_ID, run.run_id)
    assert all(tags.items() <= j["tags"].items() for j in jobs)
