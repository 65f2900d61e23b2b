"""The budget arithmetic: hourly rate x hours running, compared with the maximum, and the reason it gives."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.budget import Budget

START = 1_800_000_000.0


def test_accrues_the_hourly_rate_over_the_running_time():
    budget = Budget(max_cost_usd=10.0, cost_per_hour_usd=21.5)
    assert budget.accrued(START, START + 1800) == pytest.approx(10.75)
    assert budget.exceeded(START, START + 1674) is None  # $9.9975: still within
    assert budget.exceeded(START, START + 1800) == (
        "budget exceeded: accrued $10.75 > max_cost_usd $10.00 after 30.0 min; "
        "checkpoints under the output URI are kept"
    )


def test_a_job_not_running_yet_costs_nothing():
    assert Budget(0.0, 1000.0).exceeded(None, START) is None


@pytest.mark.parametrize("data", [None, {}])
def test_no_budget(data):
    assert Budget.from_dict(data) is None


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="cannot be negative"):
        Budget.from_dict({"max_cost_usd": -1, "cost_per_hour_usd": 21.5})
