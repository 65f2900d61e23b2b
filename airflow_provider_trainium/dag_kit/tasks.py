"""The tasks every training DAG has: the first task (checks, then the run plan), the skip when data prep found
nothing, the image build only when it is needed, and the compile step wired to the training step.

A factory declares its task when the DAG file is parsed; what the task runs loads when it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import task

from airflow_provider_trainium.dag_kit.plan import PLAN_TASK_ID, PlanFunction, plan_record, write_plan_record
from airflow_provider_trainium.dag_kit.templates import compile_cache_of
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

if TYPE_CHECKING:
    from airflow.sdk.definitions.xcom_arg import XComArg

    from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
    from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

#: The first task's retries, whatever the DAG's: only infrastructure errors are retried (bad input is not).
FIRST_TASK_RETRIES = 2


def check_params_task(
    entry_point: str,
    *,
    inputs: Iterable[str] = (),
    plan: PlanFunction | None = None,
    task_id: str = PLAN_TASK_ID,
    trainium_conn_id: str = DEFAULT_CONN_ID,
    only_stack: str | None = None,
) -> XComArg:
    """The DAG's first task: ``check_run``, then ``plan(params, config, context)`` when given (its dict is the
    task's return value, read downstream with ``planned``). ``only_stack``: the one stack the entry point runs
    on. It retries (``FIRST_TASK_RETRIES``) whatever the DAG's default: an API call that times out under load is
    no reason to fail the run, and bad input fails it at once anyway (``AirflowFailException``, never retried)."""
    inputs = tuple(inputs)

    @task(task_id=task_id, retries=FIRST_TASK_RETRIES, retry_delay=timedelta(seconds=10))
    def check_params(params: dict | None = None, **context: Any) -> dict[str, Any] | None:
        from airflow_provider_trainium.dag_kit.checks import check_run

        config = check_run(
            params or {},
            entry_point=entry_point,
            inputs=inputs,
            trainium_conn_id=trainium_conn_id,
            only_stack=only_stack,
            dag=context.get("dag"),
        )
        if not plan:
            return None
        planned_uris = plan(params or {}, config, context)
        write_plan_record(context, config, planned_uris, task_id)
        return planned_uris

    check_params.__doc__ = f"Refuse a bad layout, image or input for {entry_point} before anything starts."
    return check_params()


def has_data_task(
    plan: XComArg, *, skip_message: str = "SKIP: nothing to train on: {reason}", task_id: str = "has_data"
) -> XComArg:
    """Short-circuits the rest of the run when ``<plan data_uri>/index.json`` says data prep skipped.

    ``skip_message`` is formatted with the plan's keys and ``reason``; the malformed records are printed.
    """

    @task.short_circuit(task_id=task_id)
    def has_data(planned: Any, **context: Any) -> bool:  # `planned`: the plan task's XCom, a dependency only
        from airflow_provider_trainium import artifacts

        plan = plan_record(context)  # the sealed record, not the XCom
        index = artifacts.read_json(f"{plan['data_uri'].rstrip('/')}/index.json")
        if index.get("skipped"):
            print(skip_message.format(**plan, reason=index.get("reason")))
            return False
        print(f"{index['records']} records, {index['malformed_count']} malformed (skipped): {index['malformed'][:20]}")
        return True

    return has_data(plan)


def image_branch_task(*, build_task_id: str, skip_to: str, task_id: str = "image_needed") -> XComArg:
    """Branches to ``build_task_id`` for remote compute without an ``image`` param, else to ``skip_to``."""

    @task.branch(task_id=task_id)
    def image_needed(params: dict | None = None) -> str:
        from airflow_provider_trainium.compute.backends import resolve_compute
        from airflow_provider_trainium.dag_kit.helpers import trainium_config

        params = params or {}
        compute = resolve_compute(params["compute"], trainium_config(), int(params["nodes"]))
        return skip_to if params.get("image") or compute == "local" else build_task_id

    return image_needed()


def compile_then_train(
    *,
    entry_point: str,
    job_args: list[str],
    layout: Mapping[str, Any],
    train_task_id: str = "train",
    compile_task_id: str = "compile",
    trial_steps: int = 10,
    cache_key_extra: dict[str, Any] | None = None,
    **train_kwargs: Any,
) -> tuple[TrainiumCompileOperator, TrainiumTrainingOperator]:
    """The compile step (a short trial that fills the compile cache) and the training job on the same layout
    and arguments, so the cache key matches; training reads the cache the compile step returned."""
    from airflow_provider_trainium.operators.compile import TrainiumCompileOperator
    from airflow_provider_trainium.operators.training import TrainiumTrainingOperator

    compile_op = TrainiumCompileOperator(
        task_id=compile_task_id,
        entry_point=entry_point,
        job_args=job_args,
        trial_steps=trial_steps,
        cache_key_extra=cache_key_extra or None,
        **layout,
    )
    train = TrainiumTrainingOperator(
        task_id=train_task_id,
        entry_point=entry_point,
        job_args=job_args,
        compile_cache_uri=compile_cache_of(compile_task_id),
        **layout,
        **train_kwargs,
    )
    compile_op >> train
    return compile_op, train
