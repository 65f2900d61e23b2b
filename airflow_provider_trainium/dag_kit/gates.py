"""Promotion gates: a registered model moves ``latest`` only when the evaluation job's verdict record passed its
very files (``registry.verdict``), whatever the task states say.

A task state can be set by hand in the UI; the verdict record sits beside the files it judged, so the gate reads
it, and ``promote_latest`` checks it again against the version it moves the alias to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from airflow.sdk import task

from airflow_provider_trainium.dag_kit.plan import plan_record

if TYPE_CHECKING:
    from airflow.sdk import Context
    from airflow.sdk.definitions.xcom_arg import XComArg

    from airflow_provider_trainium.operators.registry import TrainiumPromoteModelAliasOperator


def evaluation_gate_task(
    plan: XComArg,
    *,
    describe: Callable[[dict[str, Any], dict[str, Any], Any], str],
    registered: XComArg | None = None,
    task_id: str = "passes_gate",
    evaluation_task_id: str = "evaluate",
) -> XComArg:
    """Short-circuits promotion unless the evaluation job's verdict record (derived for this run, not a task state)
    says it passed; prints ``describe(evaluation, plan, registered)`` so the log says why (``registered``: the
    register task's value). ``promote_latest`` checks the verdict against the version's files again."""

    @task.short_circuit(task_id=task_id)
    def gate(planned: Any, registered: Any = None, **context: Any) -> bool:  # `planned`: a dependency only
        from airflow_provider_trainium.dag_kit.helpers import fail_on_mismatch, read_evaluation
        from airflow_provider_trainium.operators.registry import evaluation_job_name, evaluation_uri
        from airflow_provider_trainium.registry.verdict import VerdictError, check_verdict, read_verdict
        from airflow_provider_trainium.registry.verdict import describe as verdict_line

        plan = plan_record(context)  # the sealed record, not the XCom
        airflow_context = cast("Context", context)
        where = fail_on_mismatch(lambda: evaluation_uri(airflow_context, evaluation_task_id))
        try:
            job = evaluation_job_name(airflow_context, evaluation_task_id)
            verdict = check_verdict(read_verdict(where), None, where, job, must_pass=False)
        except VerdictError as err:
            print(f"no verdict to trust from {evaluation_task_id!r} ({err}): nothing to promote")
            return False
        print(describe(read_evaluation(context, evaluation_task_id), plan, registered))
        print("verdict:", verdict_line(verdict))
        return verdict["passed"] is True

    return gate(plan, registered)


def promote_latest(
    model_name: str,
    *,
    reason: str,
    promote_manual_runs: bool,
    promote_backfill_runs: bool = False,
    register_task_id: str = "register",
    evaluation_task_id: str = "evaluate",
) -> TrainiumPromoteModelAliasOperator:
    """Moves ``latest`` to the version the register task returned, forward only (rerunning an old interval never
    moves it back), and only when the ``evaluation_task_id`` verdict passed that version's files;
    ``promote_manual_runs``/``promote_backfill_runs`` say whether manual/backfill runs may move it."""
    from airflow_provider_trainium.operators.registry import TrainiumPromoteModelAliasOperator

    return TrainiumPromoteModelAliasOperator(
        task_id="promote_latest",
        model_name=model_name,
        alias="latest",
        version="{{ ti.xcom_pull(task_ids='" + register_task_id + "')['version'] }}",
        reason=reason,
        forward_only=True,
        promote_manual_runs=promote_manual_runs,
        promote_backfill_runs=promote_backfill_runs,
        evaluation_task_id=evaluation_task_id,
    )
