"""NeuronJobOperator's own policy: bad input is not retried, a try's spec is prepared once and carried."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobHandle, JobState, JobStatus
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.compile import NeuronCompileOperator
from airflow_provider_trainium.operators.job import NeuronJobOperator, PreparedJob
from tests.conftest import set_trainium_connection

HANDLE = JobHandle("local", "job-1", "job", {})


@dataclass
class TaskInstanceStandIn:
    dag_id: str = "d"
    task_id: str = "t"
    run_id: str = "manual__2026-11-30T00:00:00+00:00"
    map_index: int = -1
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value

    def xcom_pull(self, **_: Any) -> None:
        return None


def context() -> dict[str, Any]:
    return {"ti": TaskInstanceStandIn()}


def test_exit_code_65_fails_without_retry_and_names_the_cause():
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    op = NeuronJobOperator(task_id="t", entry_point="m")
    spec = JobSpec(name="t", entry_point="m")
    bad_input = JobStatus(JobState.FAILED, "node 0 exited with code 65", 65, ("ERROR: --epochs must be > 0",))
    with pytest.raises(AirflowFailException, match=r"(?s)--epochs must be > 0.*bad input: not retried"):
        op.finish(context(), spec, HANDLE, bad_input)
    with pytest.raises(AirflowException) as crashed:
        op.finish(context(), spec, HANDLE, JobStatus(JobState.FAILED, "node 0 exited with code 1", 1))
    assert not isinstance(crashed.value, AirflowFailException)  # any other failure may be retried


def test_a_job_stopped_over_budget_fails_without_retry():
    from airflow.providers.common.compat.sdk import AirflowFailException

    op = NeuronJobOperator(task_id="t", entry_point="m", max_cost_usd=5)
    spec = JobSpec(name="t", entry_point="m")
    reason = (
        "budget exceeded: accrued $5.02 > max_cost_usd $5.00 after 14.0 min; checkpoints under the output URI are kept"
    )
    with pytest.raises(AirflowFailException, match=r"(?s)accrued \$5\.02.*over budget: not retried"):
        op.finish(context(), spec, HANDLE, JobStatus(JobState.FAILED, reason))


def test_the_wait_gets_the_budget_and_the_jobs_hourly_rate():
    op = NeuronJobOperator(task_id="t", entry_point="m", max_cost_usd="12.5")
    prepared = PreparedJob(
        "batch", JobSpec(name="t", entry_point="m", env={"TRAINIUM_COST_PER_HOUR_USD": "43"}), "j", {}
    )
    assert op.budget_limit(prepared) == {"max_cost_usd": 12.5, "cost_per_hour_usd": 43.0}
    assert NeuronJobOperator(task_id="t", entry_point="m").budget_limit(prepared) is None


def test_execute_complete_finishes_with_the_spec_prepared_before_deferring():
    class NeverRebuilds(NeuronJobOperator):
        def build_spec(self, *args: Any) -> JobSpec:
            raise AssertionError("the spec was rebuilt after the deferral")

    carried = PreparedJob("batch", JobSpec(name="t", entry_point="m", output_uri="s3://b/carried"), "job", {"k": "v"})
    restored = PreparedJob.from_dict(carried.to_dict())
    assert restored == carried
    op = NeverRebuilds(task_id="t", entry_point="m")
    event = {"handle": HANDLE.to_dict(), "state": "SUCCEEDED"}
    assert op.execute_complete(context(), event, prepared=carried.to_dict()) == "s3://b/carried"


def test_a_try_prepares_once_and_runs_every_pre_submit_check(tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    seen: list[str] = []

    class Counting(NeuronJobOperator):
        def build_spec(self, *args: Any) -> JobSpec:
            seen.append("build")
            return super().build_spec(*args)

        def pre_submit_checks(self) -> list[Any]:
            return [*super().pre_submit_checks(), lambda ctx, prepared, backend: seen.append(prepared.compute)]

    op = Counting(task_id="t", entry_point="m", compute="local", nodes="2", instance_type="trn1.32xlarge")
    ctx = context()
    first = op.prepare(ctx)
    assert op.prepare(ctx) is first and seen == ["build", "local"]
    assert first.spec.nodes == 2 and first.job_name.startswith("d-t-")


def test_the_compile_operator_builds_its_own_spec_and_leaves_its_fields_alone(tmp_path, monkeypatch):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    op = NeuronCompileOperator(task_id="t", entry_point="m", job_args=["--lr", "0.1"], compute="local", trial_steps=3)
    prepared = op.prepare(context())
    assert prepared.spec.args == ("--lr", "0.1", "--compile-only", "--max-steps", "3")
    assert prepared.spec.env["TRAINIUM_COMPILE_CACHE_URI"] == f"{tmp_path.as_uri()}/compile-cache/d"
    assert prepared.spec.output_uri.endswith("/t/compile") and prepared.spec.wrapper == ()
    assert op.job_args == ["--lr", "0.1"] and op.compile_cache_uri is None
