"""Cost records from describe responses (the shapes AWS documents), the local estimate and the job env."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.compute.batch.billing import batch_intervals
from airflow_provider_trainium.compute.cost import (
    COST_IS_ESTIMATE_ENV,
    COST_PER_HOUR_ENV,
    cost_environment,
    cost_line,
    cost_record,
    job_cost,
    local_cost,
    with_cost_environment,
)
from airflow_provider_trainium.compute.ecs.billing import ecs_intervals
from airflow_provider_trainium.neuron.budget import OverBudgetError, check_budget
from airflow_provider_trainium.neuron.pricing import PRICES, Price, parse_prices
from airflow_provider_trainium.neuron.spec import JobSpec

T0 = 1_780_000_000.0  # unix seconds
PRICE = Price("trn1.32xlarge", 20.0, "us-east-1", "2026-11-01", "test")
KEYS = {"usd", "estimate_usd", "is_estimate", "nodes", "instance_type", "price_per_node_hour_usd", "price_date",
        "wall_s", "started_at", "stopped_at"}  # fmt: skip


def ms(seconds: float) -> int:
    return int(seconds * 1000)


def test_a_retried_container_job_pays_for_every_attempt():
    job = {"startedAt": ms(T0 + 900), "stoppedAt": ms(T0 + 1800),
           "attempts": [{"startedAt": ms(T0), "stoppedAt": ms(T0 + 600)},
                        {"startedAt": ms(T0 + 900), "stoppedAt": ms(T0 + 1800)}]}  # fmt: skip
    cost = cost_record(batch_intervals(job), instance_type="trn1.32xlarge", nodes=1, price=PRICE)
    assert set(cost) == KEYS
    assert cost["usd"] == pytest.approx(20.0 * 1500 / 3600, abs=1e-4)
    assert cost["wall_s"] == 1800.0
    assert cost["started_at"] == datetime.fromtimestamp(T0, UTC).isoformat(timespec="seconds")


def test_node_jobs_are_summed_and_a_running_node_counts_up_to_now():
    parent = {"nodeProperties": {"numNodes": 2}, "startedAt": ms(T0)}
    nodes = [{"attempts": [{"startedAt": ms(T0), "stoppedAt": ms(T0 + 3600)}]},
             {"attempts": [{"startedAt": ms(T0 + 600)}]}]  # fmt: skip
    cost = cost_record(batch_intervals(parent, nodes), instance_type="trn1.32xlarge", nodes=2, price=PRICE,
                       now=T0 + 3600)  # fmt: skip
    assert cost["usd"] == pytest.approx(20.0 * (3600 + 3000) / 3600, abs=1e-4)
    assert cost["stopped_at"] is None and cost["wall_s"] == 3600.0


def test_a_node_job_not_yet_marked_stopped_ends_with_its_job():
    parent = {"nodeProperties": {"numNodes": 2}, "startedAt": ms(T0), "stoppedAt": ms(T0 + 1800)}
    nodes = [{"attempts": [{"startedAt": ms(T0), "stoppedAt": ms(T0 + 1800)}]},
             {"attempts": [{"startedAt": ms(T0 + 600)}]}]  # fmt: skip
    assert batch_intervals(parent, nodes) == [(T0, T0 + 1800), (T0 + 600, T0 + 1800)]


def test_without_node_jobs_the_parent_counts_once_per_node():
    parent = {"nodeProperties": {"numNodes": 4}, "startedAt": ms(T0), "stoppedAt": ms(T0 + 1800)}
    cost = cost_record(batch_intervals(parent), instance_type="trn1.32xlarge", nodes=4, price=PRICE)
    assert cost["usd"] == pytest.approx(4 * 20.0 * 0.5)


def test_a_job_that_never_started_costs_nothing():
    cost = cost_record(batch_intervals({"status": "RUNNABLE"}), instance_type="trn1.32xlarge", nodes=2, price=PRICE)
    assert (cost["usd"], cost["wall_s"], cost["started_at"], cost["stopped_at"]) == (0.0, 0.0, None, None)


@pytest.mark.parametrize(
    "task",
    [
        {"startedAt": datetime(2026, 11, 30, 10, tzinfo=UTC), "stoppedAt": datetime(2026, 11, 30, 11, tzinfo=UTC)},
        {"startedAt": "2026-11-30T10:00:00+00:00", "stoppedAt": "2026-11-30T11:00:00+00:00"},  # through JSON
    ],
)
def test_ecs_reads_datetimes(task):
    cost = cost_record(ecs_intervals(task), instance_type="trn1.2xlarge", nodes=1, price=PRICES["trn1.2xlarge"])
    assert cost["usd"] == pytest.approx(PRICES["trn1.2xlarge"].usd_per_hour, abs=1e-4)
    assert cost["stopped_at"] == "2026-11-30T11:00:00+00:00"


def test_local_costs_nothing_and_estimates_the_layout():
    cost = local_cost("trn1.32xlarge", 2, T0, T0 + 900)
    assert cost["usd"] == 0.0 and cost["is_estimate"] is True
    assert cost["estimate_usd"] == pytest.approx(2 * PRICES["trn1.32xlarge"].usd_per_hour * 0.25, abs=1e-4)
    assert cost["price_date"] == PRICES["trn1.32xlarge"].as_of and cost["wall_s"] == 900.0


class AsksTheService:
    """A billing backend that counts how often the cost step asks it for the job's intervals."""

    name = "batch"

    def __init__(self, intervals: list[tuple[float, float | None]] | None) -> None:
        self.intervals = intervals
        self.asked = 0

    def billed_intervals(self, handle: JobHandle) -> list[tuple[float, float | None]] | None:
        self.asked += 1
        return self.intervals


SPEC = JobSpec(name="t", entry_point="trainium_trainer.x", instance_type="trn1.32xlarge", nodes=2)
HANDLE = JobHandle("batch", "j-1", "t")


def test_what_the_watch_saw_billed_is_priced_without_asking_the_service():
    backend = AsksTheService([(T0, T0 + 1800), (T0 + 600, T0 + 1800)])
    asked = job_cost(backend, HANDLE, SPEC, prices={"trn1.32xlarge": PRICE})  # type: ignore[arg-type]
    seen = job_cost(backend, HANDLE, SPEC, prices={"trn1.32xlarge": PRICE},  # type: ignore[arg-type]
                    billed=((T0, T0 + 1800), (T0 + 600, T0 + 1800)))  # fmt: skip
    assert backend.asked == 1 and seen == asked and seen["usd"] == pytest.approx(20.0 * 3000 / 3600, abs=1e-4)
    never_started = job_cost(backend, HANDLE, SPEC, prices={"trn1.32xlarge": PRICE}, billed=())  # type: ignore[arg-type]
    assert backend.asked == 1 and never_started["usd"] == 0.0 and never_started["started_at"] is None


def test_a_backend_that_bills_nothing_is_estimated_from_its_handles_start():
    local = JobHandle("local", "j-1", "t", {"started_at": T0})
    cost = job_cost(AsksTheService(None), local, SPEC, now=T0 + 900)  # type: ignore[arg-type]
    assert cost == local_cost("trn1.32xlarge", 2, T0, T0 + 900, now=T0 + 900)


def test_the_log_line_names_the_estimate_only_on_local_compute():
    local = local_cost("trn1.32xlarge", 2, T0, T0 + 900)
    assert cost_line(local) == (
        f"cost: $0.00 (est. ${local['estimate_usd']:.2f} as 2 x trn1.32xlarge), 900s, "
        f"prices of {PRICES['trn1.32xlarge'].as_of}"
    )
    billed = cost_record([(T0, T0 + 1800)], instance_type="trn1.32xlarge", nodes=1, price=PRICE)
    assert cost_line(billed) == "cost: $10.00, 1800s, prices of 2026-11-01"


def test_the_cost_variables_are_set_over_the_jobs_own():
    spec = JobSpec(name="t", entry_point="trainium_trainer.x", instance_type="trn1.32xlarge", nodes=4,
                   env={COST_PER_HOUR_ENV: "0", "KEEP": "1"})  # fmt: skip
    priced = with_cost_environment(spec, "batch")
    assert priced.env == {"KEEP": "1", COST_PER_HOUR_ENV: "86", COST_IS_ESTIMATE_ENV: "0"}


def test_job_environment_carries_the_whole_jobs_rate():
    spec = JobSpec(name="t", entry_point="trainium_trainer.x", instance_type="trn1.32xlarge", nodes=4)
    assert cost_environment(spec, "batch") == {COST_PER_HOUR_ENV: "86", COST_IS_ESTIMATE_ENV: "0"}
    prices = {**PRICES, **parse_prices({"trn1.32xlarge": 13.23}, "test")}
    assert cost_environment(spec, "local", prices) == {COST_PER_HOUR_ENV: "52.92", COST_IS_ESTIMATE_ENV: "1"}


def test_the_budget_guard_prices_the_job_at_the_rate_its_env_carries():
    """The operator's two calls before submit agree: ``check_budget`` and ``cost_environment`` price the same job.

    Local runs are guarded too, against the estimate for their layout: a DAG refused on AWS is refused here.
    """
    spec = JobSpec(name="t", entry_point="trainium_trainer.x", instance_type="trn1.32xlarge", nodes=2)
    prices = {**PRICES, **parse_prices({"trn1.32xlarge": 13.23}, "test")}
    env = cost_environment(spec, "local", prices)
    check = check_budget(spec.nodes, spec.instance_type, 3600, 2 * 13.23, prices=prices)
    assert check.within and f"{check.hourly_usd:.6g}" == env[COST_PER_HOUR_ENV] and env[COST_IS_ESTIMATE_ENV] == "1"
    with pytest.raises(OverBudgetError, match="exceeds max_cost_usd"):
        check_budget(spec.nodes, spec.instance_type, 3601, 2 * 13.23, prices=prices)
