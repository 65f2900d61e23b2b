"""The checks of a DAG's first task: what a run cannot do is refused before data prep or any paid job starts.

Each check fails the task for good (``AirflowFailException``: a retry would be refused the same way), except a
preflight error only because AWS did not answer, which leaves the task to its retries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.dag_kit.helpers import trainium_config
from airflow_provider_trainium.hooks.trainium_fields import DEFAULT_CONN_ID

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig


def check_run(
    params: Mapping[str, Any],
    *,
    entry_point: str,
    inputs: Iterable[str] = (),
    trainium_conn_id: str = DEFAULT_CONN_ID,
    only_stack: str | None = None,
    dag: Any = None,
) -> TrainiumConfig:
    """Fail the task (no retry) for a ``max_cost_usd`` above ``dag``'s budget ceiling or unset under one
    (``budget_problem``), an untrusted ``image``, an input param outside the allowed prefixes, a
    layout the instance type cannot hold (``tensor_parallel_size`` counts when the DAG has it), a ``stack`` the
    instance family cannot train (or, with ``only_stack``, any other stack than the one the entry point runs
    on), or any error of ``airflow trainium preflight`` for the layout (its AWS checks run only for remote
    compute)."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    from airflow_provider_trainium.dag_kit.params import check_image_param, check_input_param
    from airflow_provider_trainium.neuron.releases import resolve_stack
    from airflow_provider_trainium.neuron.spec import check_layout

    over_budget = budget_problem(params, dag)
    if over_budget:
        raise AirflowFailException(over_budget)
    config = trainium_config(trainium_conn_id)
    check_image_param(params.get("image"), config)
    for name in inputs:
        check_input_param(name, params.get(name), config)
    if only_stack is not None:
        problem = only_stack_problem(entry_point, only_stack, params.get("stack"), str(params["instance_type"]))
        if problem:
            raise AirflowFailException(problem)
    try:
        stack = resolve_stack(str(params.get("stack") or "auto"), str(params["instance_type"]))
        check_layout(
            params["instance_type"],
            int(params["nodes"]),
            tensor_parallel_size=int(params.get("tensor_parallel_size") or 1),
            entry_point=entry_point,
            stack=stack,
        )
    except ValueError as err:  # JobSpecError included
        raise AirflowFailException(str(err)) from err
    local_problem = local_trainer_problem(config, params, entry_point, stack)
    if local_problem:
        raise AirflowFailException(local_problem)
    preflight(config, params)
    return config


def budget_problem(params: Mapping[str, Any], dag: Any) -> str | None:
    """Why the run's ``max_cost_usd`` breaks the ceiling ``dag``'s author set (``budget_params``): above it, or
    unset while one exists. The form refuses both; this refuses a conf that reached the run another way, in the
    first task, so no paid job starts (the job operator caps the budget again before each submit). The ceiling
    is read from the DAG's definition (``neuron.budget.dag_budget_ceiling``), never from the run."""
    from airflow_provider_trainium.neuron.budget import BUDGET_PARAM, budget_usd, capped_budget, dag_budget_ceiling

    ceiling = dag_budget_ceiling(dag)
    if ceiling is None:
        return None
    try:
        if budget_usd(params.get(BUDGET_PARAM)) is None:
            return (
                f"max_cost_usd is unset, but this DAG's ceiling is ${ceiling:.2f}: every run has a budget here; "
                f"leave the param at its default (${ceiling:.2f}) or give a lower one"
            )
        capped_budget(params.get(BUDGET_PARAM), ceiling)
    except ValueError as err:
        return str(err)
    return None


def local_trainer_problem(
    config: TrainiumConfig, params: Mapping[str, Any], entry_point: str, stack: str
) -> str | None:
    """On local compute, a worker without the stack's trainer extra (``compute.local.extras``): refused here,
    before data prep spends a try on ``No module named ...``."""
    from airflow_provider_trainium.compute.backends import resolve_compute
    from airflow_provider_trainium.compute.local.extras import missing_trainer_extra

    try:
        compute = resolve_compute(str(params.get("compute") or "auto"), config, int(params["nodes"]))
    except ValueError:
        return None  # the preflight names a compute it does not know
    return missing_trainer_extra(entry_point, stack) if compute == "local" else None


def only_stack_problem(entry_point: str, only: str, stack: str | None, instance_type: str) -> str | None:
    """Why a run of ``entry_point``, which runs on stack ``only`` alone, cannot run with ``stack`` on
    ``instance_type``; names the families to choose instead of the other stack ``stack_problem`` would suggest."""
    from airflow_provider_trainium.neuron.releases import auto_stack, family, stack_problem, table
    from airflow_provider_trainium.neuron.stack_names import STACK_AUTO

    chosen = auto_stack(instance_type) if stack in (None, "", STACK_AUTO) else str(stack)
    trains = sorted(
        {f for r in table().releases.values() if r.stack == only and r.offers_training for f in r.training_families}
    )
    fix = f"{entry_point} runs on stack {only!r} only: choose an instance type of {', '.join(trains)}"
    if chosen != only:
        return f"stack {stack!r} is {chosen!r} on {family(instance_type)} ({instance_type}); {fix}"
    if stack_problem(only, instance_type):
        return f"stack {only!r} does not train on {family(instance_type)} ({instance_type}); {fix}"
    return None


def preflight(config: TrainiumConfig, params: Mapping[str, Any]) -> None:
    """``airflow trainium preflight`` for the run's layout: fail on any error, log each warning. Only errors
    because AWS did not answer (throttled, 5xx) leave the task to its retries; any other fails it for good."""
    import logging

    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    from airflow_provider_trainium.preflight import errors, run_preflight

    results = run_preflight(
        config,
        instance_type=str(params["instance_type"]),
        nodes=int(params["nodes"]),
        compute=str(params.get("compute") or "auto"),
        image=params.get("image") or None,
        stack=str(params.get("stack") or "auto"),
        capacity_reservation=params.get("capacity_reservation") or None,
    )
    log = logging.getLogger(__name__)
    for result in results:
        if result.status == "warning":
            log.warning("preflight %s: %s", result.name, result.reason)
    failed = errors(results)
    if failed:
        message = "preflight failed (`airflow trainium preflight` shows every check): " + "; ".join(
            f"{r.name}: {r.reason}" for r in failed
        )
        raise (AirflowException if all(r.transient for r in failed) else AirflowFailException)(message)
