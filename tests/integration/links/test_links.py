"""Extra links: one record read by every link; a local run logs no ERROR, Batch links point at the console."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.links.batch import batch_job_url, batch_node_log_url
from airflow_provider_trainium.links.record import LINKS_XCOM_KEY, job_record
from tests.conftest import set_trainium_connection
from tests.dag_files import import_dag_file

BATCH = JobHandle(
    "batch",
    "4c7a2d1e-0b1c-4d2e-9f00-1a2b3c4d5e6f",
    "trainium_allreduce_smoke-allreduce",
    {"region_name": "us-west-2", "log_group": "/aws/batch/job", "spec_hash": "x"},
)
STREAMS = {"0": "trainium-allreduce/default/aaaa", "1": "trainium-allreduce/default/bbbb"}


def test_batch_job_link_opens_the_job_detail_page():
    assert batch_job_url(job_record(BATCH)) == (
        "https://console.aws.amazon.com/batch/home?region=us-west-2#jobs/detail/4c7a2d1e-0b1c-4d2e-9f00-1a2b3c4d5e6f"
    )


def test_batch_node_link_opens_that_node_stream_with_console_escaping():
    record = job_record(BATCH, STREAMS)
    assert batch_node_log_url(record, 1) == (
        "https://console.aws.amazon.com/cloudwatch/home?region=us-west-2#logsV2:log-groups/log-group/"
        "$252Faws$252Fbatch$252Fjob/log-events/trainium-allreduce$252Fdefault$252Fbbbb"
    )
    assert batch_node_log_url(record, 2) == ""  # no stream found for that node (yet)


def test_batch_links_are_empty_for_other_backends_and_for_no_job():
    ecs = JobHandle("ecs", "arn:task", "n", {"region_name": "us-west-2", "cluster": "c", "task_id": "t"})
    assert batch_job_url(job_record(ecs)) == "" and batch_node_log_url(job_record(ecs, STREAMS), 0) == ""
    assert batch_job_url({"kind": None}) == ""
    gov = job_record(JobHandle("batch", "j", "n", {"region_name": "us-gov-west-1", "partition": "aws-us-gov"}))
    assert batch_job_url(gov).startswith("https://console.amazonaws-us-gov.com/batch/")


DAG_FILE = """
import datetime as dt
import os

from airflow.sdk import DAG, Param

from airflow_provider_trainium.operators.job import TrainiumJobOperator

with DAG("links_local_run", schedule=None, start_date=dt.datetime(2026, 1, 1),
         params={"compute": Param("local", enum=["local", "ecs", "batch"])}) as dag:
    # compute is templated, as in the shipped DAGs, so the task keeps its ECS and Batch links
    TrainiumJobOperator(task_id="job", entry_point="tests.integration.jobs.report_env",
                        job_args=[os.environ["LINKS_TEST_OUT"]], compute="{{ params.compute }}", distributed=False)
"""


def run_small_dag(folder, monkeypatch):
    return import_dag_file(folder, "links_local_run", DAG_FILE, "links-tests", monkeypatch).dag.test()


def test_local_run_logs_no_error_and_every_link_reads_the_record(tmp_path, monkeypatch, capfd, caplog):
    set_trainium_connection(monkeypatch, artifact_root=tmp_path.as_uri())
    monkeypatch.setenv("LINKS_TEST_OUT", str(tmp_path / "out"))
    caplog.set_level(logging.INFO)
    run = run_small_dag(tmp_path / "dags", monkeypatch)
    out, err = capfd.readouterr()
    assert str(run.state) == "success", out[-3000:]
    assert list((tmp_path / "out").glob("rank-*.json"))  # the job really ran
    logged = (out + err).splitlines() + [f"{r.levelname} {r.getMessage()}" for r in caplog.records]
    assert [line for line in logged if "[error" in line or line.startswith(("ERROR", "CRITICAL"))] == []
    ti = run.get_task_instance("job")
    record = ti.xcom_pull(task_ids="job", key=LINKS_XCOM_KEY)
    assert record["kind"] == "local" and record["job_id"]
    links = {link.xcom_key: ti.xcom_pull(task_ids="job", key=link.xcom_key) for link in small_links()}
    assert len(links) == 11 and set(links.values()) == {""}  # every link computed, all empty on local


def small_links():
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    return TrainiumJobOperator(task_id="t", entry_point="m", compute="auto").operator_extra_links


@pytest.mark.parametrize("compute,expected", [("local", 0), ("{{ params.compute }}", 11), ("batch", 9), ("ecs", 2)])
def test_a_literal_backend_declares_only_its_own_links(compute, expected):
    from airflow_provider_trainium.operators.job import TrainiumJobOperator

    assert len(TrainiumJobOperator(task_id="t", entry_point="m", compute=compute).operator_extra_links) == expected
