"""The restart tests' DAG: ``hold`` is a local job that stays in flight, for no compute, until its test writes the
go file (``tests/integration/jobs/count_runs.py``, which also counts each start), then ``after`` runs on a
worker, which only a scheduler that still makes progress gets to."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_provider_trainium.operators.job import TrainiumJobOperator

#: ``<root>/<run id>`` is the job's work folder: its ``started`` lines and the test's ``go`` file.
HOLD_ROOT = os.path.join(os.environ.get("AIRFLOW_HOME", "."), "hold")

with DAG(
    dag_id="trainium_e2e_hold",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=2)},
    tags=["e2e"],
) as dag:
    hold = TrainiumJobOperator(
        task_id="hold",
        entry_point="tests.integration.jobs.count_runs",
        job_args=[HOLD_ROOT + "/{{ run_id }}"],
        compute="local",
        distributed=False,
    )

    @task
    def after() -> str:
        return "done"

    hold >> after()
