"""The templates a DAG file declares: the plan's values, the shared DAG arguments, the job layout, and another
task's output re-derived from the run's identity (an XCom that disagrees fails the task naming both)."""

from __future__ import annotations

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from airflow_provider_trainium.dag_kit import templates
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.unit.dag_kit.conftest import RUN_ID, RunTI


def test_planned_reads_the_plan_task_return_value() -> None:
    assert templates.planned("data_uri") == "{{ trainium_plan('check_params')['data_uri'] }}"
    assert templates.planned("x", task_id="plan") == "{{ trainium_plan('plan')['x'] }}"
    macros = templates.dag_args()["user_defined_macros"]
    assert set(macros) == {"trainium_plan", "trainium_output", "trainium_compile_cache"}


BUDGET = {
    "max_cost_usd": "{{ params.max_cost_usd }}",
    "allow_over_budget_estimate": "{{ params.allow_over_budget_estimate }}",
}


def test_job_layout_distributed_and_single_node() -> None:
    assert templates.job_layout(workload="llm") == {
        "compute": "{{ params.compute }}",
        "instance_type": "{{ params.instance_type }}",
        "nodes": "{{ params.nodes }}",
        "stack": "{{ params.stack }}",
        "image": templates.IMAGE_FROM_PARAMS,
        "workload": "llm",
        **BUDGET,
    }
    single = templates.job_layout("img", single_node=True, instance_type=None)
    assert single == {"compute": "{{ params.compute }}", "image": "img", "distributed": False, **BUDGET}


def test_a_templated_output_is_re_derived_and_an_edited_xcom_fails_naming_both(root):
    with DAG("derived", schedule=None, **templates.dag_args()) as dag:
        train = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train")
        register = TrainiumJobOperator(task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate",
                                       job_args=["--model-uri", templates.output_of("train")])  # fmt: skip
        train >> register
    derived = f"{root}/runs/derived/"
    ti = RunTI(dag_id="derived", run_id=RUN_ID, task_id="evaluate", map_index=-1, xcoms={})
    context = {"ti": ti, "dag": dag, "run_id": RUN_ID, "params": {}}
    rendered = register.render_template(templates.output_of("train"), context)
    assert rendered.startswith(derived) and rendered.endswith("/train")
    ti.xcoms["train"] = rendered + "/"
    assert register.render_template(templates.output_of("train"), context) == rendered
    ti.xcoms["train"] = "file:///tmp/planted"
    with pytest.raises(AirflowFailException) as err:
        register.render_template(templates.output_of("train"), context)
    assert "file:///tmp/planted" in str(err.value) and rendered in str(err.value)


def test_planned_args_are_trainer_flags_for_plan_values_in_order() -> None:
    from airflow_provider_trainium.dag_kit.templates import planned, planned_args

    assert planned_args("data_uri", "base_model_uri") == [
        "--data-uri",
        planned("data_uri"),
        "--base-model-uri",
        planned("base_model_uri"),
    ]


def test_trainium_dag_is_manual_tagged_and_keeps_airflows_run_limit_unless_told() -> None:
    from airflow_provider_trainium.dag_kit.templates import trainium_dag

    with trainium_dag("one", "d", tags=["smoke"], params={}, retries=0) as plain:
        pass
    with trainium_dag("two", "d", tags=[], params={}, schedule="@daily", max_active_runs=2) as daily:
        pass
    assert (plain.schedule, set(plain.tags), plain.description) == (None, {"trainium", "smoke"}, "d")
    assert plain.max_active_runs == DAG("bare", schedule=None).max_active_runs  # Airflow's default
    assert "retries" not in plain.default_args and daily.default_args["retries"] == 1
    assert (daily.schedule, daily.max_active_runs, daily.catchup) == ("@daily", 2, False)
    assert "trainium_plan" in (daily.user_defined_macros or {})


def test_trainium_dag_params_reach_a_running_task_without_a_copy_in_each_operator() -> None:
    from airflow.sdk import Param
    from airflow.sdk.definitions.param import process_params

    with templates.trainium_dag("t", "d", tags=[], params={"epochs": Param(5, type="integer")}) as dag:
        task = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train")
    assert "epochs" not in task.params  # no parse-time copy of the DAG's params
    assert dag.params["epochs"] == 5 and "trainium" in dag.tags
    assert process_params(dag, task, {}, suppress_exception=False)["epochs"] == 5
    assert process_params(dag, task, {"epochs": 7}, suppress_exception=False)["epochs"] == 7


def test_trainium_dag_still_refuses_a_default_its_schema_refuses_on_a_schedule() -> None:
    from airflow.sdk import Param

    bad = {"n": Param("a", type="integer")}
    with (
        pytest.raises(ValueError, match="not allowed to define a Schedule"),
        templates.trainium_dag("t", "d", tags=[], schedule="@daily", params=bad),
    ):
        pass
