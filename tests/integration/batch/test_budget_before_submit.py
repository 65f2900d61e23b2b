"""The budget guard on AWS Batch: a run whose worst case exceeds ``max_cost_usd`` never reaches SubmitJob."""

from __future__ import annotations

import importlib.util
import json

from tests.integration.batch.conftest import IMAGE

DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.job import TrainiumJobOperator

with DAG("budget_guard", schedule=None, start_date=dt.datetime(2026, 1, 1)) as dag:
    TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.allreduce", compute="batch",
                        instance_type="trn1.32xlarge", nodes=2, image={image!r},
                        execution_timeout=dt.timedelta(hours=1), max_cost_usd={budget!r}, retries=2,
                        retry_delay=dt.timedelta(seconds=0))
"""


def load_dag_file(tmp_path, monkeypatch, dag_id: str, source: str):
    """``source`` as the DAG file ``<dag_id>.py`` of its own bundle, imported; its DAG."""
    folder = tmp_path / "dags"
    folder.mkdir()
    path = folder / f"{dag_id}.py"
    path.write_text(source)
    bundle = {"name": "budget", "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
              "kwargs": {"path": str(folder), "refresh_interval": 0}}  # fmt: skip
    monkeypatch.setenv("AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", json.dumps([bundle]))
    spec = importlib.util.spec_from_file_location(dag_id, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.dag


def load_dag(tmp_path, monkeypatch, budget: float):
    return load_dag_file(tmp_path, monkeypatch, "budget_guard", DAG_FILE.format(image=IMAGE, budget=budget))


def test_a_budget_below_the_worst_case_is_refused_before_submit_job(batch_env, tmp_path, monkeypatch, capfd):
    dag = load_dag(tmp_path, monkeypatch, budget=10.0)  # worst case: 2 nodes x $21.50/h x 1 h = $43
    run = dag.test()

    ti = run.get_task_instance("train")
    assert str(ti.state) == "failed" and ti.try_number == 1  # bad input: no retry, though retries=2
    assert batch_env.batch.list_jobs(jobQueue=batch_env.queue, jobStatus="SUBMITTED")["jobSummaryList"] == []
    definitions = batch_env.batch.describe_job_definitions(status="ACTIVE")["jobDefinitions"]
    assert definitions == []  # nothing was registered either
    printed = capfd.readouterr()
    assert "worst case $43.00 exceeds max_cost_usd $10.00: 2 x trn1.32xlarge" in printed.out + printed.err


def test_the_dags_budget_param_reaches_the_job(batch_env, capfd):
    from tests.dag_runs import get_dag

    dag = get_dag("trainium_allreduce_smoke")
    run = dag.test(run_conf={"compute": "batch", "nodes": 2, "instance_type": "trn1.32xlarge", "max_cost_usd": 5})

    assert str(run.get_task_instance("allreduce").state) == "failed"
    assert batch_env.batch.list_jobs(jobQueue=batch_env.queue, jobStatus="SUBMITTED")["jobSummaryList"] == []
    printed = capfd.readouterr()
    assert "exceeds max_cost_usd $5.00: 2 x trn1.32xlarge" in printed.out + printed.err


CEILING_DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.params import budget_params

with DAG("budget_ceiling", schedule=None, start_date=dt.datetime(2026, 1, 1),
         params=budget_params(ceiling_usd={ceiling!r})) as dag:
    TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.allreduce", compute="batch",
                        instance_type="trn1.32xlarge", nodes=2, image={image!r},
                        execution_timeout=dt.timedelta(hours=1), max_cost_usd={budget!r}, retries=2,
                        retry_delay=dt.timedelta(seconds=0))
"""


def load_ceiling_dag(tmp_path, monkeypatch, ceiling: float, budget: str):
    source = CEILING_DAG_FILE.format(image=IMAGE, ceiling=ceiling, budget=budget)
    return load_dag_file(tmp_path, monkeypatch, "budget_ceiling", source)


def test_a_budget_above_the_dags_ceiling_is_refused_before_submit_job(batch_env, tmp_path, monkeypatch, capfd):
    """The task's budget resolves to $100 (as if a template or a conf got past the form); the DAG author's
    ceiling of $50 still holds: refused before anything is registered or submitted, and not retried."""
    dag = load_ceiling_dag(tmp_path, monkeypatch, ceiling=50.0, budget="100")
    run = dag.test()

    ti = run.get_task_instance("train")
    assert str(ti.state) == "failed" and ti.try_number == 1
    assert batch_env.batch.list_jobs(jobQueue=batch_env.queue, jobStatus="SUBMITTED")["jobSummaryList"] == []
    assert batch_env.batch.describe_job_definitions(status="ACTIVE")["jobDefinitions"] == []
    printed = capfd.readouterr()
    assert "max_cost_usd $100.00 is above this DAG's ceiling $50.00" in printed.out + printed.err


def test_without_a_run_budget_the_dags_ceiling_is_the_budget(batch_env, tmp_path, monkeypatch, capfd):
    """No budget on the task: the ceiling ($10) applies, and the $43 worst case is refused."""
    dag = load_ceiling_dag(tmp_path, monkeypatch, ceiling=10.0, budget="{{ params.max_cost_usd }}")
    run = dag.test()

    assert str(run.get_task_instance("train").state) == "failed"
    assert batch_env.batch.list_jobs(jobQueue=batch_env.queue, jobStatus="SUBMITTED")["jobSummaryList"] == []
    printed = capfd.readouterr()
    assert "worst case $43.00 exceeds max_cost_usd $10.00" in printed.out + printed.err
