"""A task that fails before its job exists (bad input, refused in ``prepare``) logs its cause and nothing else
in error: Airflow still computes every extra link at the end of the try, and each must find the record the
operator pushed before anything could fail (else 11 ``XCom not found`` errors bury the cause)."""

from __future__ import annotations

import logging

from tests.conftest import set_trainium_connection
from tests.dag_files import import_dag_file

DAG_FILE = """
import datetime as dt

from airflow.sdk import DAG, Param

from airflow_provider_trainium.operators.job import TrainiumJobOperator

with DAG("links_bad_input", schedule=None, start_date=dt.datetime(2026, 1, 1),
         params={"compute": Param("local", enum=["local", "ecs", "batch"]), "instance_type": "trn9.huge"}) as dag:
    # compute templated as in the shipped DAGs: the task keeps all 11 links
    TrainiumJobOperator(task_id="job", entry_point="tests.integration.jobs.report_env", compute="{{ params.compute }}",
                        instance_type="{{ params.instance_type }}", distributed=False, retries=0)
"""

CAUSE = "stack 'xla' does not train on trn9 (trn9.huge)"


def test_a_task_failing_in_prepare_logs_its_cause_and_no_xcom_error(tmp_path, monkeypatch, capfd, caplog):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    caplog.set_level(logging.INFO)
    run = import_dag_file(tmp_path / "dags", "links_bad_input", DAG_FILE, "links-bad-input", monkeypatch).dag.test()
    out, err = capfd.readouterr()
    logged = (out + err).splitlines() + [f"{r.levelname} {r.getMessage()}" for r in caplog.records]
    assert str(run.state) == "failed", out[-3000:]
    assert any(CAUSE in line for line in logged), out[-3000:]
    assert [line for line in logged if "XCom not found" in line] == []
    errors = [line for line in logged if "[error" in line or line.startswith(("ERROR", "CRITICAL"))]
    assert errors and all(CAUSE in line or "Task failed" in line for line in errors), "\n".join(errors)
