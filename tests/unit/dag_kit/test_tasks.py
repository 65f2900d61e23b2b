"""The tasks every training DAG has (``dag_kit.tasks``): the first task retries what is not bad input."""

from __future__ import annotations

from airflow.sdk import DAG

from airflow_provider_trainium.dag_kit.tasks import FIRST_TASK_RETRIES, check_params_task
from airflow_provider_trainium.dag_kit.templates import dag_args


def test_the_first_task_retries_even_in_a_dag_that_retries_nothing():
    """An API call that times out under load must not fail the run; bad input raises AirflowFailException, which
    Airflow never retries (``dag_kit.checks.check_run``)."""
    with DAG("no_retries", schedule=None, **dag_args(retries=0)) as dag:
        check_params_task("trainium_trainer.allreduce")
    first = dag.get_task("check_params")
    assert first.retries == FIRST_TASK_RETRIES >= 1
