"""The budget guard: the worst case against max_cost_usd, with the numbers in the message."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_provider_trainium.neuron.budget import OverBudgetError, budget_timeout, check_budget
from airflow_provider_trainium.neuron.pricing import PRICES, parse_prices

TRN1 = PRICES["trn1.32xlarge"].usd_per_hour


def test_within_budget_returns_the_figures():
    check = check_budget(2, "trn1.32xlarge", timedelta(hours=1), 2 * TRN1)
    assert check.within and check.worst_case_usd == pytest.approx(2 * TRN1) and check.hourly_usd == 2 * TRN1


def test_over_budget_is_refused_with_the_numbers():
    with pytest.raises(OverBudgetError) as err:
        check_budget(4, "trn1.32xlarge", timedelta(hours=2), 100.0)
    message = str(err.value)
    assert f"worst case ${4 * TRN1 * 2:.2f} exceeds max_cost_usd $100.00" in message
    assert f"4 x trn1.32xlarge at ${TRN1:.2f}/h" in message and "execution_timeout 2h" in message
    assert f"at most {100.0 / (4 * TRN1):.4g}h" in message
    assert isinstance(err.value, ValueError)


def test_allow_over_budget_estimate_lets_it_start():
    check = check_budget(4, "trn1.32xlarge", 7200, 100.0, allow_over_budget_estimate=True)
    assert not check.within and check.allowed_over


def test_a_budget_without_a_timeout_is_refused_unless_allowed():
    with pytest.raises(OverBudgetError, match=r"no execution_timeout.*at most [0-9.]+h fits the budget"):
        check_budget(1, "trn1.2xlarge", None, 5.0)
    assert check_budget(1, "trn1.2xlarge", None, 5.0, allow_over_budget_estimate=True).worst_case_usd is None


def test_no_budget_means_no_check():
    assert check_budget(64, "trn2.48xlarge", None, None).within


def test_the_guard_uses_the_given_prices():
    prices = {**PRICES, **parse_prices({"trn1.32xlarge": 1.0}, "test")}
    assert check_budget(4, "trn1.32xlarge", timedelta(hours=2), 10.0, prices=prices).worst_case_usd == 8.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, "trn1.2xlarge", 60, 1.0), "nodes must be"),
        ((1, "trn1.2xlarge", 60, -1.0), "max_cost_usd must be a positive number"),
        ((1, "trn1.2xlarge", timedelta(0), 1.0), "execution_timeout must be a positive duration"),
        ((1, "p4d.24xlarge", 60, 1.0), "no price for instance type 'p4d.24xlarge'"),
    ],
)
def test_bad_arguments_are_clear_errors(args, message):
    with pytest.raises(ValueError, match=message):
        check_budget(*args)


def test_a_refusal_names_the_number_each_setting_would_need():
    """Four trn1.32xlarge nodes for 2 h cost $172: a $100 budget fits any one of these changes."""
    with pytest.raises(OverBudgetError) as err:
        check_budget(4, "trn1.32xlarge", timedelta(hours=2), 100.0)
    assert (
        f"Change one number: max_cost_usd to at least ${8 * TRN1:.2f}, execution_timeout to at most "
        f"{100.0 / (4 * TRN1):.4g}h or nodes to at most 2; or set allow_over_budget_estimate=True"
    ) in str(err.value)


def test_a_refusal_says_when_no_node_count_fits():
    with pytest.raises(OverBudgetError, match=r"at most 0\.4651h \(no node count fits: one node for 1h costs more\)"):
        check_budget(2, "trn1.32xlarge", timedelta(hours=1), 20.0)


def test_the_budget_timeout_is_the_longest_the_budget_affords_in_whole_seconds_at_most_the_longest():
    assert budget_timeout(2, "trn1.32xlarge", 50.0, timedelta(hours=24)) == timedelta(seconds=4186)
    assert check_budget(2, "trn1.32xlarge", timedelta(seconds=4186), 50.0).within  # rounded down: it fits
    assert budget_timeout(2, "trn1.32xlarge", 5000.0, timedelta(hours=24)) == timedelta(hours=24)
    prices = {**PRICES, **parse_prices({"trn1.32xlarge": 1.0}, "test")}
    assert budget_timeout(1, "trn1.32xlarge", 0.5, timedelta(hours=24), prices) == timedelta(minutes=30)


def test_a_budget_that_affords_under_a_minute_is_refused_with_the_budget_a_minute_needs():
    with pytest.raises(OverBudgetError, match=r"affords 41 s of 2 x trn1\.32xlarge .* at least \$0\.72 or use fewer"):
        budget_timeout(2, "trn1.32xlarge", 0.5, timedelta(hours=24))
    with pytest.raises(ValueError, match="max_cost_usd must be a positive number"):
        budget_timeout(1, "trn1.32xlarge", -1.0, timedelta(hours=24))
