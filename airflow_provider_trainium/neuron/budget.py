"""The budget guard before submit: refuse a run whose worst case costs more than its ``max_cost_usd``.

The worst case is every node billed for the whole execution timeout: nodes x hourly price x timeout.
A budget without a timeout has no worst case, so it is refused too (the run could cost anything) unless
``allow_over_budget_estimate`` is set; that flag starts either run anyway and leaves the mid-run guard
as the only stop. Both settings are templated operator fields, so they are read here from strings too.

A job task given a budget but no ``execution_timeout`` gets the longest timeout its budget affords
(:func:`budget_timeout`), never more than the default: otherwise the 24 h default alone would refuse every
budget below a day's price, and a task could only run by repeating its budget as a timeout.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow_provider_trainium.neuron.pricing import Price, price_of
from airflow_provider_trainium.neuron.spec import JobSpec


class OverBudgetError(ValueError):
    """A run that may cost more than its budget. Not worth a retry: the operator fails the task for good."""


@dataclass(frozen=True)
class BudgetCheck:
    """What the guard worked out: the figures its message and the task log show."""

    max_cost_usd: float | None
    worst_case_usd: float | None
    hourly_usd: float
    timeout_s: float | None
    allowed_over: bool = False
    nodes: int = 1
    instance_type: str = ""

    @property
    def within(self) -> bool:
        if self.max_cost_usd is None:
            return True
        return self.worst_case_usd is not None and self.worst_case_usd <= self.max_cost_usd

    def summary(self) -> str | None:
        """The task log's line for a run with a budget (None without one)."""
        if self.max_cost_usd is None:
            return None
        anyway = "" if self.within else ": over budget, started anyway (allow_over_budget_estimate)"
        return (
            f"budget ${self.max_cost_usd:.2f}; worst case ${self.worst_case_usd or 0.0:.2f} ({self.nodes} x "
            f"{self.instance_type} at ${self.hourly_usd / self.nodes:.2f}/h for {(self.timeout_s or 0) / 3600:.4g}h)"
            f"{anyway}"
        )


def budget_usd(value: Any) -> float | None:
    """``max_cost_usd`` (templated: it may arrive as a string) as a number, or None for no budget."""
    if value in (None, "", "None"):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"max_cost_usd must be a number of USD, got {value!r}") from None


def over_budget_allowed(value: Any) -> bool:
    """``allow_over_budget_estimate`` (templated: ``"True"``/``"False"`` from a DAG param) as a bool."""
    if isinstance(value, str):
        if value.strip().lower() not in ("true", "false", ""):
            raise ValueError(f"allow_over_budget_estimate must be true or false, got {value!r}")
        return value.strip().lower() == "true"
    return bool(value)


def _timeout_seconds(execution_timeout: timedelta | float | None) -> float | None:
    if execution_timeout is None:
        return None
    seconds = execution_timeout.total_seconds() if isinstance(execution_timeout, timedelta) else execution_timeout
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"execution_timeout must be a positive duration, got {execution_timeout!r}")
    return float(seconds)


def _check_layout_and_budget(nodes: int, max_cost_usd: float | None) -> None:
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be a whole number of at least 1, got {nodes!r}")
    if max_cost_usd is not None and (
        isinstance(max_cost_usd, bool)
        or not isinstance(max_cost_usd, int | float)
        or not math.isfinite(max_cost_usd)
        or max_cost_usd <= 0
    ):
        raise ValueError(f"max_cost_usd must be a positive number of USD, got {max_cost_usd!r}")


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.4g}h"


def check_budget(
    nodes: int,
    instance_type: str,
    execution_timeout: timedelta | float | None,
    max_cost_usd: float | None,
    allow_over_budget_estimate: bool = False,
    prices: Mapping[str, Price] | None = None,
) -> BudgetCheck:
    """Raise :class:`OverBudgetError`, with the numbers, when the worst case may exceed ``max_cost_usd``.

    ``execution_timeout`` is a timedelta or seconds; no budget (None) means no check. Returns the figures.
    """
    _check_layout_and_budget(nodes, max_cost_usd)
    price = price_of(instance_type, prices)
    hourly = price.usd_per_hour * nodes
    timeout_s = _timeout_seconds(execution_timeout)
    worst = None if timeout_s is None else hourly * timeout_s / 3600
    check = BudgetCheck(
        max_cost_usd, worst, hourly, timeout_s, allow_over_budget_estimate, nodes=nodes, instance_type=instance_type
    )
    if check.within or allow_over_budget_estimate or max_cost_usd is None:  # (no budget: always within)
        return check
    layout = f"{nodes} x {instance_type} at ${price.usd_per_hour:.2f}/h (prices of {price.as_of})"
    if worst is None or timeout_s is None:  # one is None when the other is
        raise OverBudgetError(
            f"max_cost_usd ${max_cost_usd:.2f} cannot be checked: the task has no execution_timeout, so the "
            f"worst case of {layout} = ${hourly:.2f}/h has no bound. Set execution_timeout (at most "
            f"{_hours(max_cost_usd / hourly * 3600)} fits the budget) or allow_over_budget_estimate=True"
        )
    raise OverBudgetError(
        f"worst case ${worst:.2f} exceeds max_cost_usd ${max_cost_usd:.2f}: {layout} x execution_timeout "
        f"{_hours(timeout_s)}. Change one number: {_fixes(nodes, price.usd_per_hour, timeout_s, max_cost_usd)}; "
        "or set allow_over_budget_estimate=True"
    )


def _fixes(nodes: int, node_usd_per_hour: float, timeout_s: float, max_cost_usd: float) -> str:
    """Each single change that makes the worst case fit, with its number: a refusal says what to type, not only
    which settings exist."""
    worst = nodes * node_usd_per_hour * timeout_s / 3600
    fixes = [
        f"max_cost_usd to at least ${math.ceil(worst * 100) / 100:.2f}",
        f"execution_timeout to at most {_hours(max_cost_usd / (nodes * node_usd_per_hour) * 3600)}",
    ]
    fitting_nodes = math.floor(max_cost_usd / (node_usd_per_hour * timeout_s / 3600))
    if fitting_nodes < 1:
        return " or ".join(fixes) + f" (no node count fits: one node for {_hours(timeout_s)} costs more)"
    return f"{fixes[0]}, {fixes[1]} or nodes to at most {fitting_nodes}"


#: Shorter than this, a budget-derived timeout would end the job before it could do anything: refused instead.
MIN_BUDGET_TIMEOUT_S = 60


def budget_timeout(
    nodes: int,
    instance_type: str,
    max_cost_usd: float,
    longest: timedelta,
    prices: Mapping[str, Price] | None = None,
) -> timedelta:
    """The longest job timeout ``max_cost_usd`` affords for ``nodes`` x ``instance_type``, at most ``longest``.

    Whole seconds, rounded down, so the worst case the guard then computes is never above the budget. A budget
    that affords under a minute is refused (:class:`OverBudgetError`): such a job would time out at once.
    """
    _check_layout_and_budget(nodes, max_cost_usd)
    price = price_of(instance_type, prices)
    hourly = price.usd_per_hour * nodes
    seconds = math.floor(max_cost_usd / hourly * 3600)
    if seconds < MIN_BUDGET_TIMEOUT_S:
        raise OverBudgetError(
            f"max_cost_usd ${max_cost_usd:.2f} affords {seconds} s of {nodes} x {instance_type} at "
            f"${price.usd_per_hour:.2f}/h (prices of {price.as_of}), under a minute. Raise max_cost_usd to at least "
            f"${math.ceil(hourly * MIN_BUDGET_TIMEOUT_S / 36) / 100:.2f}"
            + (f" or use fewer nodes than {nodes}" if nodes > 1 else "")
        )
    return min(timedelta(seconds=seconds), longest)


#: The DAG param whose schema ``maximum`` is the DAG author's budget ceiling (``params.budget_params``).
BUDGET_PARAM = "max_cost_usd"


def dag_budget_ceiling(dag: Any) -> float | None:
    """The ceiling a DAG's author set on ``max_cost_usd`` (its param schema's ``maximum``), None without one.

    It is read from the DAG's definition, never from the run, so a run's conf cannot move it.
    """
    params = getattr(dag, "params", None)
    if params is None or BUDGET_PARAM not in params:
        return None
    maximum = params.get_param(BUDGET_PARAM).schema.get("maximum")
    if isinstance(maximum, bool) or not isinstance(maximum, int | float):
        return None
    return float(maximum)


def capped_budget(max_cost_usd: Any, ceiling_usd: float | None) -> float | None:
    """The job's budget under the DAG's ceiling: the ceiling when the run set none, the run's when lower;
    a budget above the ceiling is a ValueError (refused before submit, not silently cut)."""
    budget = budget_usd(max_cost_usd)
    if ceiling_usd is None:
        return budget
    if budget is None:
        return ceiling_usd
    if budget > ceiling_usd:
        raise ValueError(
            f"max_cost_usd ${budget:.2f} is above this DAG's ceiling ${ceiling_usd:.2f}: a run may lower the "
            "budget, not raise it (the ceiling is the DAG author's, in its params)"
        )
    return budget


def check_job_budget(
    spec: JobSpec,
    max_cost_usd: Any,
    allow_over_budget_estimate: Any = False,
    prices: Mapping[str, Price] | None = None,
) -> BudgetCheck:
    """:func:`check_budget` for a job: every node of ``spec`` billed until the job's own timeout stops it.

    ``max_cost_usd`` and ``allow_over_budget_estimate`` are the operator's (templated) settings as given.
    """
    return check_budget(
        spec.nodes,
        spec.instance_type,
        float(spec.timeout_seconds),
        budget_usd(max_cost_usd),
        over_budget_allowed(allow_over_budget_estimate),
        prices,
    )
