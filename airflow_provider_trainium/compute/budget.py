"""Stop a running job once what it has cost passes its budget (the job's checkpoints stay for a rerun).

The cost is the job's hourly rate times the hours since AWS started running it: the same figure the job's
``TRAINIUM_COST_PER_HOUR_USD`` carries. A stopped job is a plain failure: a retry with a higher budget
resumes from the checkpoints under its output URI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_provider_trainium.compute.cost import COST_PER_HOUR_ENV
from airflow_provider_trainium.neuron.budget import budget_usd
from airflow_provider_trainium.neuron.spec import JobSpec

#: The reason given to TerminateJob / StopTask.
STOP_REASON = "budget exceeded"


def watch_budget(max_cost_usd: Any, spec: JobSpec) -> dict[str, float] | None:
    """What a watch needs to stop a job that passes its budget (``Budget.from_dict``): the budget, and the
    hourly rate the job's environment carries (its progress line shows the same). None: no budget."""
    budget = budget_usd(max_cost_usd)
    if budget is None:
        return None
    return {"max_cost_usd": budget, "cost_per_hour_usd": float(spec.env[COST_PER_HOUR_ENV])}


@dataclass(frozen=True)
class Budget:
    max_cost_usd: float
    cost_per_hour_usd: float

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Budget | None:
        """``{"max_cost_usd": float, "cost_per_hour_usd": float}`` or None (no budget)."""
        if not data:
            return None
        budget = cls(float(data["max_cost_usd"]), float(data["cost_per_hour_usd"]))
        if budget.max_cost_usd < 0 or budget.cost_per_hour_usd < 0:
            raise ValueError(f"a budget cannot be negative: {data}")
        return budget

    def accrued(self, started_at: float, now: float) -> float:
        return self.cost_per_hour_usd * max(0.0, now - started_at) / 3600.0

    def exceeded(self, started_at: float | None, now: float) -> str | None:
        """The failure reason when the job running since ``started_at`` costs more than allowed, else None."""
        if started_at is None:
            return None  # not running yet: nothing is billed
        accrued = self.accrued(started_at, now)
        if accrued <= self.max_cost_usd:
            return None
        minutes = max(0.0, now - started_at) / 60.0
        return (
            f"{STOP_REASON}: accrued ${accrued:.2f} > max_cost_usd ${self.max_cost_usd:.2f} after {minutes:.1f} min; "
            "checkpoints under the output URI are kept"
        )
