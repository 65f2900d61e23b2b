"""What a watch stops a job at: the budget as the operator's templated setting gives it, at the rate the job's env
carries (the rate its progress line shows)."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.budget import Budget, watch_budget
from airflow_provider_trainium.compute.cost import COST_PER_HOUR_ENV
from airflow_provider_trainium.neuron.spec import JobSpec

SPEC = JobSpec(name="t", entry_point="m", env={COST_PER_HOUR_ENV: "43"})


@pytest.mark.parametrize("setting", [None, "", "None"])
def test_no_budget_no_stop(setting):
    assert watch_budget(setting, SPEC) is None


@pytest.mark.parametrize("setting", [12.5, "12.5"])
def test_the_watch_gets_the_budget_and_the_jobs_hourly_rate(setting):
    limit = watch_budget(setting, SPEC)
    assert limit == {"max_cost_usd": 12.5, "cost_per_hour_usd": 43.0}
    assert Budget.from_dict(limit) == Budget(12.5, 43.0)


def test_a_budget_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="max_cost_usd must be a number of USD, got 'ten'"):
        watch_budget("ten", SPEC)
