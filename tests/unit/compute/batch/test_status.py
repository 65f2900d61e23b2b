"""Reading a Batch job description: state, exit code, log stream and when it started running."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.batch.status import batch_state, exit_code, log_stream, started_at
from airflow_provider_trainium.compute.batch.watch import BatchJobWatch


def test_a_job_terminated_by_airflow_reads_as_cancelled_and_a_budget_stop_as_failed():
    assert batch_state({"status": "FAILED", "statusReason": "Airflow: deadline passed"}) is JobState.CANCELLED
    assert batch_state({"status": "FAILED", "statusReason": "budget exceeded"}) is JobState.FAILED
    assert batch_state({"status": "RUNNABLE"}) is JobState.PENDING


def test_exit_code_and_stream_fall_back_to_the_latest_attempt():
    job = {"attempts": [{"container": {"exitCode": 1}}, {"container": {"exitCode": 65, "logStreamName": "s/2"}}]}
    assert exit_code(job) == 65 and log_stream(job) == "s/2"


def test_started_at_is_in_seconds():
    assert started_at({"startedAt": 1_800_000_000_500}) == 1_800_000_000.5
    assert started_at({"attempts": [{"startedAt": 1_800_000_000_000}]}) == 1_800_000_000.0
    assert started_at({"status": "RUNNABLE"}) is None


def test_a_multi_node_job_without_its_own_start_counts_from_its_first_node():
    watch = BatchJobWatch(handle={"job_id": "j"}, deadline=0.0, num_nodes=2, budget={"max_cost_usd": 1.0,
                          "cost_per_hour_usd": 1.0})  # fmt: skip
    nodes = {"j#0": {"startedAt": 1_800_000_060_000}, "j#1": {"startedAt": 1_800_000_000_000}}
    assert watch._start({"status": "RUNNING"}, nodes) == 1_800_000_000.0
    assert watch._start({"status": "RUNNING", "startedAt": 1_800_000_030_000}, nodes) == 1_800_000_030.0
    assert watch._start({"status": "RUNNING"}, {}) is None
