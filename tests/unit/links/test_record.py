"""Every job link reads the one link record: its own backend's record gives a console URL, anything else ""."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.links.batch import BatchJobLink, BatchNodeLogsLink
from airflow_provider_trainium.links.ecs import EcsTaskLink, EcsTaskLogLink
from airflow_provider_trainium.links.record import RecordLink, job_record

BATCH = JobHandle("batch", "4c7a2d1e-0b1c", "job", {"region_name": "us-west-2", "log_group": "/aws/batch/job"})
ECS = JobHandle(
    "ecs",
    "arn:aws:ecs:eu-west-1:1:task/trainium/0f1e2d3c",
    "job",
    {"cluster": "trainium", "task_id": "0f1e2d3c", "region_name": "eu-west-1", "log_group": "/trainium/jobs",
     "log_stream": "trainium/trainer/0f1e2d3c"},
)  # fmt: skip
RECORDS: dict[str, Any] = {
    "batch": job_record(BATCH, {"0": "s/default/aaaa", "1": "s/default/bbbb"}),
    "ecs": job_record(ECS),
    "local": job_record(JobHandle("local", "job-1", "job", {})),
    "no job yet": {"kind": None},
    "no record": None,
}


def stored(link: RecordLink, record: Any) -> RecordLink:
    """``link`` reading ``record`` as if Airflow's XCom held it for the task instance."""
    link.read_record = lambda ti_key: record  # type: ignore[method-assign]
    return link


def get_link(link: RecordLink, record: Any) -> str:
    return stored(link, record).get_link(None, ti_key=None)


def test_batch_get_link_opens_the_job_and_each_node_stream():
    assert get_link(BatchJobLink(), RECORDS["batch"]).endswith("#jobs/detail/4c7a2d1e-0b1c")
    assert get_link(BatchNodeLogsLink(node=1), RECORDS["batch"]).endswith("/log-events/s$252Fdefault$252Fbbbb")
    assert get_link(BatchNodeLogsLink(node=5), RECORDS["batch"]) == ""


def test_ecs_get_link_opens_the_task_and_its_stream():
    assert get_link(EcsTaskLink(), RECORDS["ecs"]) == (
        "https://console.aws.amazon.com/ecs/v2/clusters/trainium/tasks/0f1e2d3c/configuration?region=eu-west-1"
    )
    assert get_link(EcsTaskLogLink(), RECORDS["ecs"]).endswith("/log-events/trainium%2Ftrainer%2F0f1e2d3c")


@pytest.mark.parametrize("what", ["batch", "ecs", "local", "no job yet", "no record"])
def test_a_link_for_another_backend_or_no_record_is_empty_and_silent(what, caplog):
    caplog.set_level(logging.DEBUG)
    links = [EcsTaskLink(), EcsTaskLogLink(), BatchJobLink(), BatchNodeLogsLink(node=0)]
    foreign = [link for link in links if link.kind != what]
    assert [get_link(link, RECORDS[what]) for link in foreign] == [""] * len(foreign)
    assert caplog.records == []
