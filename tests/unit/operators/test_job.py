"""TrainiumJobOperator's own policy: bad input is not retried, a try's spec is prepared once and carried, and
both ways of waiting (deferred, in the worker) get the same watch and price the job from what it saw billed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import (
    ComputeBackend,
    JobEvent,
    JobHandle,
    JobState,
    JobStatus,
    WatchRequest,
)
from airflow_provider_trainium.compute.watch import WatchedBackend
from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.prepared_job import PreparedJob
from airflow_provider_trainium.triggers.base import JobWatchTrigger
from tests.conftest import set_trainium_connection
from tests.task_instance import StateStore, TaskInstanceStandIn

HANDLE = JobHandle("local", "job-1", "job", {})


def context() -> dict[str, Any]:
    return {"ti": TaskInstanceStandIn(), "task_state_store": StateStore()}


def test_exit_code_65_fails_without_retry_and_names_the_cause():
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    op = TrainiumJobOperator(task_id="t", entry_point="m")
    spec = JobSpec(name="t", entry_point="m")
    bad_input = JobStatus(JobState.FAILED, "node 0 exited with code 65", 65, ("ERROR: --epochs must be > 0",))
    with pytest.raises(AirflowFailException, match=r"(?s)--epochs must be > 0.*bad input: not retried"):
        op.finish(context(), spec, HANDLE, bad_input)
    with pytest.raises(AirflowException) as crashed:
        op.finish(context(), spec, HANDLE, JobStatus(JobState.FAILED, "node 0 exited with code 1", 1))
    assert not isinstance(crashed.value, AirflowFailException)  # any other failure may be retried


def test_a_job_stopped_over_budget_fails_without_retry():
    from airflow.providers.common.compat.sdk import AirflowFailException

    op = TrainiumJobOperator(task_id="t", entry_point="m", max_cost_usd=5)
    spec = JobSpec(name="t", entry_point="m")
    reason = (
        "budget exceeded: accrued $5.02 > max_cost_usd $5.00 after 14.0 min; checkpoints under the output URI are kept"
    )
    with pytest.raises(AirflowFailException, match=r"(?s)accrued \$5\.02.*over budget: not retried"):
        op.finish(context(), spec, HANDLE, JobStatus(JobState.FAILED, reason))


@dataclass
class StandInWatch:
    """A watch loop that records what it was built with and ends at once, with what the platform billed."""

    handle: dict[str, Any]
    deadline: float
    budget: dict[str, float] | None = None
    log_cursor_uri: str | None = None

    async def run(self, on_log: Any) -> AsyncIterator[JobEvent]:
        on_log("step 1")
        yield JobEvent(self.handle, JobState.SUCCEEDED, billed_intervals=((T0, T0 + 1800),))

    async def cancel(self, reason: str) -> None:
        raise AssertionError("nothing cancels this job")


class StandInTrigger(JobWatchTrigger):
    watch_class = StandInWatch


class WatchedStandIn(WatchedBackend, ComputeBackend):
    """A deferring backend whose every wait, deferred or not, is built by ``watch``; it bills only through it."""

    name = "batch"
    defers = True
    runs_image = False
    trigger_classpath = f"{__name__}.StandInTrigger"

    def __init__(self) -> None:
        self.watches: list[StandInWatch] = []

    def watch(self, request: WatchRequest) -> StandInWatch:
        self.watches.append(
            StandInWatch(request.handle.to_dict(), request.deadline, request.budget, request.log_cursor_uri)
        )
        return self.watches[-1]

    def submit(self, spec: JobSpec, job_name: str, tags: dict[str, str]) -> JobHandle:
        return JobHandle(self.name, "job-7", job_name)

    def find_existing(self, job_name: str, tags: dict[str, str]) -> JobHandle | None:
        return None

    def status(self, handle: JobHandle) -> JobStatus:
        return JobStatus(JobState.RUNNING)

    def cancel(self, handle: JobHandle, reason: str) -> None:
        raise AssertionError("nothing cancels this job")

    def billed_intervals(self, handle: JobHandle) -> list[tuple[float, float | None]]:
        raise AssertionError("the cost was asked of the platform: the watch's event already said it")


T0 = 1_800_000_000.0
RATE = {"TRAINIUM_COST_PER_HOUR_USD": "43"}


def watched(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, **kwargs: Any) -> tuple[TrainiumJobOperator, Any]:
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    op = TrainiumJobOperator(task_id="t", entry_point="m", compute="batch", max_cost_usd="12.5", **kwargs)
    spec = JobSpec(name="t", entry_point="m", instance_type="trn1.32xlarge", env=RATE, output_uri="s3://b/out")
    op._prepared = PreparedJob("batch", spec, "job", {})
    op._backend = WatchedStandIn()
    return op, op._backend


def test_the_trigger_and_the_worker_side_wait_get_the_same_budget_and_log_cursor(monkeypatch, tmp_path):
    from airflow.sdk.exceptions import TaskDeferred

    from airflow_provider_trainium.compute.cloudwatch import cursor_uri

    deferring, deferred_backend = watched(monkeypatch, tmp_path)
    with pytest.raises(TaskDeferred) as deferred:
        deferring.execute(context())
    waiting, waiting_backend = watched(monkeypatch, tmp_path, deferrable=False)
    assert waiting.execute(context()) == "s3://b/out"

    (in_triggerer,), (in_worker,) = deferred_backend.watches, waiting_backend.watches
    assert deferred.value.trigger.watch() == in_triggerer  # the trigger runs the loop watch() built
    for watch in (in_triggerer, in_worker):
        assert watch.log_cursor_uri == cursor_uri("s3://b/out", "job-7")
        assert watch.budget == {"max_cost_usd": 12.5, "cost_per_hour_usd": 43.0}


def test_the_cost_is_what_the_wait_saw_billed(monkeypatch, tmp_path):
    op, _ = watched(monkeypatch, tmp_path, deferrable=False)
    ctx = context()
    op.execute(ctx)  # WatchedStandIn.billed_intervals fails the test if the cost step asks the platform
    cost = ctx["ti"].xcoms["trainium_cost"]
    assert (cost["usd"], cost["wall_s"], cost["is_estimate"]) == (round(21.5 * 0.5, 4), 1800.0, False)


def test_a_deferred_jobs_cost_is_what_its_event_carried(monkeypatch, tmp_path):
    from airflow_provider_trainium.compute.cloudwatch import cursor_uri

    op, backend = watched(monkeypatch, tmp_path)
    ctx = context()
    event = JobEvent(HANDLE.to_dict(), JobState.SUCCEEDED, billed_intervals=((T0, T0 + 3600),)).to_dict()
    op.execute_complete(ctx, event, prepared=op._prepared.to_dict())  # type: ignore[union-attr]
    assert ctx["ti"].xcoms["trainium_cost"]["usd"] == 21.5
    # the worker only drains the log's tail past the cursor: no budgeted wait of its own
    assert [(w.budget, w.log_cursor_uri) for w in backend.watches] == [(None, cursor_uri("s3://b/out", "job-1"))]


def test_execute_complete_finishes_with_the_spec_prepared_before_deferring():
    class NeverRebuilds(TrainiumJobOperator):
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

    class Counting(TrainiumJobOperator):
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
    op = TrainiumCompileOperator(task_id="t", entry_point="trainium_trainer.m", job_args=["--lr", "0.1"],
                                 compute="local", trial_steps=3)  # fmt: skip
    prepared = op.prepare(context())
    assert prepared.spec.args == ("--lr", "0.1", "--compile-only", "--max-steps", "3")
    assert prepared.spec.env["TRAINIUM_COMPILE_CACHE_URI"] == f"{tmp_path.as_uri()}/compile-cache/d"
    assert prepared.spec.output_uri.endswith("/t/compile") and prepared.spec.wrapper == ()
    assert op.job_args == ["--lr", "0.1"] and op.compile_cache_uri is None


@pytest.mark.parametrize(("stack", "wrapper"), [("xla", ("neuron_parallel_compile",)), ("native", ())])
def test_the_compile_trial_is_wrapped_in_neuron_parallel_compile_on_the_xla_stack_only(
    tmp_path, monkeypatch, stack, wrapper
):
    from airflow_provider_trainium.compute.local.backend import LocalBackend

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    # a backend on Neuron hardware wraps the trial (local compute lets torch-xla fill its cache itself)
    monkeypatch.setattr(LocalBackend, "compile_wrapper", lambda self: ("neuron_parallel_compile",))
    op = TrainiumCompileOperator(task_id="t", entry_point="m", compute="local", instance_type="trn2.48xlarge",
                                 stack=stack, trial_steps=2)  # fmt: skip
    assert op.prepare(context()).spec.wrapper == wrapper


@pytest.mark.parametrize(
    ("instance_type", "stack", "resolved"),
    [("trn1.32xlarge", "auto", "xla"), ("trn2.48xlarge", "auto", "native"), ("trn2.48xlarge", "xla", "xla"),
     ("trn3.48xlarge", "native", "native")],
)  # fmt: skip
def test_stack_auto_is_resolved_by_the_instance_family(tmp_path, monkeypatch, instance_type, stack, resolved):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri(), prices={"trn3.48xlarge": 50.0})
    op = TrainiumJobOperator(task_id="t", entry_point="m", compute="local", instance_type=instance_type, stack=stack)
    assert "stack" in TrainiumJobOperator.template_fields
    assert op.prepare(context()).spec.stack == resolved


@pytest.mark.parametrize(
    ("instance_type", "stack", "message"),
    [("trn1.32xlarge", "native", r"stack 'native' does not train on trn1 \(trn1.32xlarge\).*use stack 'xla'"),
     ("trn3.48xlarge", "xla", r"stack 'xla' does not train on trn3 \(trn3.48xlarge\).*use stack 'native'"),
     ("trn2.48xlarge", "jax", r"stack 'jax' is not one of: auto, xla, native")],
)  # fmt: skip
def test_a_stack_the_family_cannot_train_fails_before_anything_is_submitted(
    tmp_path, monkeypatch, instance_type, stack, message
):
    from airflow.providers.common.compat.sdk import AirflowFailException

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    submitted: list[str] = []

    class Recording(TrainiumJobOperator):
        def backend_for(self, compute: str) -> ComputeBackend:
            backend = super().backend_for(compute)
            monkeypatch.setattr(backend, "submit", lambda *a, **k: submitted.append("submit"))
            return backend

    op = Recording(task_id="t", entry_point="m", compute="local", instance_type=instance_type, stack=stack)
    with pytest.raises(AirflowFailException, match=message):
        op.prepare(context())
    assert submitted == []


def test_wait_for_completion_false_is_refused_on_local_compute_before_anything_starts(tmp_path, monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowFailException

    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())

    class NeverAttaches(TrainiumJobOperator):
        def attach(self, *args: Any) -> Any:
            raise AssertionError("a local job was started to run detached from the worker")

    op = NeverAttaches(task_id="t", entry_point="m", compute="local", wait_for_completion=False)
    with pytest.raises(AirflowFailException, match="wait_for_completion=False needs a remote backend; local compute"):
        op.execute(context())


@dataclass
class AskedTaskInstance(TaskInstanceStandIn):
    """A try whose state Airflow reports as ``state`` (or fails to report: ``state`` an exception)."""

    state: Any = None

    def get_task_states(self, **query: Any) -> dict[str, dict[str, Any]]:
        if isinstance(self.state, Exception):
            raise self.state
        assert query == {"dag_id": "d", "task_ids": ["t"], "run_ids": [self.run_id], "map_index": None}
        return {self.run_id: {"t": self.state}}


class CancelRecorder:
    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def cancel(self, handle: JobHandle, reason: str) -> None:
        self.cancelled.append(handle.job_id)


@pytest.mark.parametrize(
    ("state", "cancelled"),
    [
        ("failed", ["job-1"]),  # a person marked it failed
        ("success", ["job-1"]),
        ("restarting", ["job-1"]),  # cleared while running: the person wants a new job
        (None, []),  # the scheduler reset the try of a scheduler that died: the next try attaches
        ("running", []),  # the worker is shutting down
        (ConnectionError("database down"), []),  # no answer: no person can have stopped it either
    ],
)
def test_a_killed_wait_stops_its_job_only_when_a_person_stopped_the_task(state, cancelled):
    op = TrainiumJobOperator(task_id="t", entry_point="m")
    backend = CancelRecorder()
    op._backend, op._handle, op._ti = backend, HANDLE, AskedTaskInstance(state=state)  # type: ignore[assignment]
    op.on_kill()
    assert backend.cancelled == cancelled


def test_what_runs_is_never_templated_so_a_runs_params_cannot_choose_the_code():
    from airflow_provider_trainium.decorators.trainium import _TrainiumDecoratedOperator
    from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

    for operator in (
        TrainiumJobOperator,
        TrainiumTrainingOperator,
        TrainiumCompileOperator,
        _TrainiumDecoratedOperator,
    ):
        assert not {"entry_point", "command", "script", "code_dir"} & set(operator.template_fields), operator


@pytest.mark.parametrize("superseded_by", ["on_kill", "a reset", "a later try"])
def test_a_try_superseded_while_its_job_ran_leaves_the_result_to_the_next_try(superseded_by, monkeypatch, tmp_path):
    """Airflow lets a killed try run on until its SIGKILL, and a reset try may not hear of its reset before its job
    ends: a job that ends then is the next try's to finish. The superseded try records no cost and pushes no result
    (two tries pushing one XCom at once fail the one that counts)."""
    from airflow.sdk.exceptions import AirflowTaskTerminated

    from airflow_provider_trainium.operators import job_wait

    op, _ = watched(monkeypatch, tmp_path, deferrable=False)
    ctx = context()

    def superseded_then_ended(*args: Any) -> JobStatus:
        if superseded_by == "on_kill":
            op.on_kill()  # the scheduler reset the try (the stand-in's Airflow gives no answer): the job runs on
        elif superseded_by == "a reset":
            ctx["task_state_store"].clear()  # a reset try's id is gone: Airflow finds nothing under it
        else:
            ctx["task_state_store"].set(job_wait.WAITING_TRY_KEY, 2)
        return JobStatus(JobState.SUCCEEDED)

    monkeypatch.setattr(job_wait, "wait_in_worker", superseded_then_ended)
    with pytest.raises(AirflowTaskTerminated, match="the next one attaches to job job-7"):
        op.execute(ctx)
    assert "trainium_cost" not in ctx["ti"].xcoms
