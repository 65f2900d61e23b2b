"""A DAG author's budget ceiling: a run's conf may lower the budget, never raise or clear it."""

from __future__ import annotations

import pytest
from airflow.sdk import DAG
from airflow.sdk.definitions.param import ParamsDict

from airflow_provider_trainium.neuron.budget import capped_budget, dag_budget_ceiling
from airflow_provider_trainium.params import budget_params, layout_params


def test_the_ceiling_is_the_params_maximum_and_default():
    params = ParamsDict(layout_params(max_cost_usd_ceiling=50))
    assert params["max_cost_usd"] == 50.0
    params.validate()  # the default is valid
    lowered = ParamsDict(layout_params(max_cost_usd_ceiling=50))
    lowered["max_cost_usd"] = 20
    assert lowered.validate()["max_cost_usd"] == 20


@pytest.mark.parametrize("conf_value", [51, None, "lots"])
def test_a_conf_cannot_raise_or_clear_the_ceiling(conf_value):
    params = ParamsDict(budget_params(ceiling_usd=50))
    with pytest.raises(Exception, match="max_cost_usd|50|None|lots"):
        params["max_cost_usd"] = conf_value
        params.validate()


def test_without_a_ceiling_no_budget_is_allowed():
    params = ParamsDict(budget_params())
    assert params["max_cost_usd"] is None
    params.validate()


def test_the_operator_reads_the_ceiling_from_the_dag_definition():
    with DAG("ceiling", schedule=None, params=budget_params(ceiling_usd=25)) as dag:
        pass
    assert dag_budget_ceiling(dag) == 25.0
    with DAG("no_ceiling", schedule=None, params=budget_params()) as plain:
        pass
    assert dag_budget_ceiling(plain) is None
    assert dag_budget_ceiling(None) is None


def test_capped_budget():
    assert capped_budget(None, 25.0) == 25.0
    assert capped_budget("10", 25.0) == 10.0
    assert capped_budget(25, 25.0) == 25.0
    assert capped_budget(None, None) is None
    assert capped_budget("30", None) == 30.0
    with pytest.raises(ValueError, match=r"above this DAG's ceiling \$25.00"):
        capped_budget("25.01", 25.0)


@pytest.mark.parametrize("bad", [0, -1, True])
def test_a_ceiling_must_be_positive(bad):
    with pytest.raises(ValueError, match="ceiling_usd"):
        budget_params(ceiling_usd=bad)
