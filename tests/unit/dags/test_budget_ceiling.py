"""Every shipped DAG starts paid jobs, so each carries a budget ceiling: the budget defaults to it, it is what the
DAG's own limits can bill at most (prices x nodes x timeout), and the first task, upstream of every job, refuses a
run whose budget is above it or unset."""

from __future__ import annotations

import math
from typing import Any

import pytest
from airflow.providers.common.compat.sdk import AirflowFailException

from airflow_provider_trainium.dag_kit.checks import budget_problem
from airflow_provider_trainium.neuron.budget import BUDGET_PARAM, dag_budget_ceiling
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.neuron.pricing import PRICES
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.dag_runs import DAGS

DAG_IDS = sorted(p.stem for p in DAGS.glob("*.py"))


@pytest.fixture(scope="module")
def dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == DAG_IDS  # one DAG per file, named after it
    return {dag_id: bag.get_dag(dag_id) for dag_id in DAG_IDS}


def first_task(dag: Any) -> Any:
    (root,) = dag.roots
    return root


def test_every_shipped_dag_starts_a_paid_job_and_declares_a_ceiling_its_budget_defaults_to(dags):
    for dag_id, dag in dags.items():
        assert any(isinstance(t, TrainiumJobOperator) for t in dag.tasks), dag_id
        ceiling = dag_budget_ceiling(dag)
        assert ceiling is not None, f"{dag_id} has no budget ceiling: a run could choose no budget"
        assert dag.params[BUDGET_PARAM] == ceiling, dag_id


def test_each_ceiling_is_the_most_the_dags_own_limits_can_bill(dags):
    """Nodes x the dearest priced instance type the form offers x the DAG's longest job timeout, rounded up to a
    dollar: no layout the form accepts is refused by its own ceiling, and the figure follows the price table."""
    for dag_id, dag in dags.items():
        schema = {name: dag.params.get_param(name).schema for name in ("instance_type", "nodes")}
        hourly = max(
            PRICES[name].usd_per_hour * min(schema["nodes"]["maximum"], CATALOG[name].max_nodes)
            for name in schema["instance_type"]["enum"]
            if name in PRICES
        )
        longest_h = max(t.execution_timeout.total_seconds() for t in dag.tasks if t.execution_timeout) / 3600
        assert dag_budget_ceiling(dag) == math.ceil(hourly * longest_h), dag_id


def test_the_first_task_is_the_checks_and_every_job_waits_for_it(dags):
    for dag_id, dag in dags.items():
        root = first_task(dag)
        assert root.python_callable.__name__ == "check_params", dag_id
        jobs = {t.task_id for t in dag.tasks if isinstance(t, TrainiumJobOperator)}
        assert jobs <= root.get_flat_relative_ids(upstream=False), dag_id


@pytest.mark.parametrize("dag_id", DAG_IDS)
@pytest.mark.parametrize(
    ("budget", "refusal"),
    [("over", "is above this DAG's ceiling"), (None, "max_cost_usd is unset"), ("", "max_cost_usd is unset")],
)
def test_the_first_task_refuses_a_budget_over_the_ceiling_or_none_before_any_job(dags, dag_id, budget, refusal):
    """The first task's own body, as the worker calls it: refused before it reads the connection or plans."""
    dag = dags[dag_id]
    ceiling = dag_budget_ceiling(dag)
    assert ceiling is not None
    params = {**dag.params.dump(), BUDGET_PARAM: ceiling + 0.01 if budget == "over" else budget}
    with pytest.raises(AirflowFailException, match=refusal):
        first_task(dag).python_callable(params=params, dag=dag)


def test_a_budget_within_the_ceiling_passes_and_a_dag_without_one_is_not_checked(dags):
    dag = dags["trainium_mnist_mlp"]
    ceiling = dag_budget_ceiling(dag)
    assert ceiling is not None
    for budget in (ceiling, ceiling / 2, str(ceiling)):
        assert budget_problem({BUDGET_PARAM: budget}, dag) is None
    assert budget_problem({BUDGET_PARAM: None}, None) is None
