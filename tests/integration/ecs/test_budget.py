"""An ECS task whose running cost passes its budget is stopped once, and the task fails with the numbers."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import JobState
from airflow_provider_trainium.compute.ecs.backend import EcsBackend
from airflow_provider_trainium.compute.naming import job_name, job_tags
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.conftest import calls
from tests.integration.ecs.conftest import IMAGE

NEVER_STOPS = {"progression": "manual", "times": 10_000}
SPEC = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=IMAGE)
BUDGET = {"max_cost_usd": 0.01, "cost_per_hour_usd": 3600.0}


def test_over_budget_task_is_stopped_once_and_fails(ecs_world, task_progress, moto_requests):
    task_progress(NEVER_STOPS)
    ecs_world.add_instance("trn1.2xlarge")
    backend = EcsBackend(ecs_world.config(), poll_interval_seconds=0.05)
    run_id = "manual__2026-01-01T00:00:00+00:00"
    handle = backend.submit(SPEC, job_name("mnist", "train", run_id), job_tags("mnist", "train", run_id))

    status = backend.wait(handle, lambda line: None, 60, budget=BUDGET)  # a missed stop ends at 60 s

    assert status.state is JobState.FAILED and status.exit_code is None
    assert status.reason.startswith("budget exceeded: accrued $") and "max_cost_usd $0.01 after" in status.reason
    assert status.reason.endswith("checkpoints under the output URI are kept")
    task = ecs_world.ecs.describe_tasks(cluster=ecs_world.cluster, tasks=[handle.job_id])["tasks"][0]
    assert task["stoppedReason"] == "budget exceeded"
    assert calls(moto_requests(), target=".StopTask") == 1
