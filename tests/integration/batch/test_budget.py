"""A Batch job whose running cost passes its budget is terminated once, and the task fails with the numbers."""

from __future__ import annotations

import re
import time

from airflow_provider_trainium.compute.base import JobState, WatchRequest
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch import moto_batch
from tests.integration.batch.conftest import IMAGE
from tests.integration.conftest import calls

TAGS = {"airflow:dag_id": "d", "airflow:task_id": "t", "airflow:run_id": "r1", "airflow:map_index": "-1"}
REASON = re.compile(
    r"^budget exceeded: accrued \$(\d+\.\d\d) > max_cost_usd \$0\.01 after (\d+\.\d) min; "
    r"checkpoints under the output URI are kept$"
)
#: $1 per second: any job running for more than 10 ms is over a $0.01 budget.
BUDGET = {"max_cost_usd": 0.01, "cost_per_hour_usd": 3600.0}


def spec() -> JobSpec:
    return JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", instance_type="trn1.2xlarge", nodes=1,
                   image=IMAGE, output_uri="s3://bucket/runs/1", timeout_seconds=3600).validate()  # fmt: skip


def test_over_budget_job_is_terminated_once_and_fails(batch_env, moto_requests):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-budget", TAGS)
    moto_batch.hold_running(batch_env.region, [handle.job_id])

    status = backend.wait(handle, lambda line: None, 60, budget=BUDGET)  # a missed stop ends at 60 s

    assert status.state is JobState.FAILED and status.exit_code is None  # a plain failure: retries resume
    match = REASON.match(status.reason)
    assert match, status.reason
    assert float(match.group(1)) > 0.01
    (job,) = batch_env.batch.describe_jobs(jobs=[handle.job_id])["jobs"]
    assert job["statusReason"] == "budget exceeded"
    assert calls(moto_requests(), path="/v1/terminatejob") == 1


def test_a_job_within_budget_runs_to_its_end(batch_env, moto_requests):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-cheap", TAGS)  # moto's Batch finishes it at once

    status = backend.wait(handle, lambda line: None, 600, budget={"max_cost_usd": 1000.0, "cost_per_hour_usd": 1.0})

    assert status.state is JobState.SUCCEEDED
    assert calls(moto_requests(), path="/v1/terminatejob") == 0


def test_the_budget_travels_with_the_deferred_trigger(batch_env):
    backend = batch_env.backend()
    handle = backend.submit(spec(), "job-deferred", TAGS)
    _, kwargs = backend.trigger(WatchRequest(handle, time.time() + 600, budget=BUDGET)).serialize()
    assert kwargs["watch"]["budget"] == BUDGET
