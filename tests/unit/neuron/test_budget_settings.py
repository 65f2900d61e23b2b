"""The guard for a prepared job: the operator's templated settings read as given, and the line the task logs."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.neuron.budget import OverBudgetError, budget_usd, check_job_budget, over_budget_allowed
from airflow_provider_trainium.neuron.pricing import PRICES
from airflow_provider_trainium.neuron.spec import JobSpec

TRN1 = PRICES["trn1.32xlarge"].usd_per_hour
SPEC = JobSpec(name="t", entry_point="m", instance_type="trn1.32xlarge", nodes=4, timeout_seconds=7200)


@pytest.mark.parametrize(("given", "read"), [(None, None), ("", None), ("None", None), ("12.5", 12.5), (7, 7.0)])
def test_a_templated_budget_reads_as_a_number_or_none(given, read):
    assert budget_usd(given) == read


@pytest.mark.parametrize(("given", "read"), [(True, True), ("True", True), (" false ", False), ("", False), (0, False)])
def test_a_templated_flag_reads_as_a_bool(given, read):
    assert over_budget_allowed(given) is read


@pytest.mark.parametrize(("reader", "given"), [(budget_usd, "ten"), (over_budget_allowed, "maybe")])
def test_a_setting_that_reads_as_neither_is_refused(reader, given):
    with pytest.raises(ValueError, match=repr(given)):
        reader(given)


def test_every_node_is_billed_until_the_jobs_own_timeout():
    check = check_job_budget(SPEC, str(8 * TRN1))
    assert check.worst_case_usd == pytest.approx(8 * TRN1) and check.within
    assert check.summary() == (
        f"budget ${8 * TRN1:.2f}; worst case ${8 * TRN1:.2f} (4 x trn1.32xlarge at ${TRN1:.2f}/h for 2h)"
    )
    with pytest.raises(OverBudgetError, match="exceeds max_cost_usd"):
        check_job_budget(SPEC, "100")


def test_started_over_budget_says_so_and_no_budget_logs_nothing():
    over = check_job_budget(SPEC, "100", "True")
    assert over.summary() == (
        f"budget $100.00; worst case ${8 * TRN1:.2f} (4 x trn1.32xlarge at ${TRN1:.2f}/h for 2h): over budget, "
        "started anyway (allow_over_budget_estimate)"
    )
    assert check_job_budget(SPEC, None).summary() is None
