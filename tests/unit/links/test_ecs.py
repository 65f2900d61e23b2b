"""ECS console links built from the link record the operator pushes."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.links.ecs import ecs_log_url, ecs_task_url
from airflow_provider_trainium.links.record import job_record

DETAILS = {
    "cluster": "arn:aws:ecs:eu-west-1:1:cluster/trainium",
    "task_id": "0f1e2d3c",
    "region_name": "eu-west-1",
    "partition": "aws",
    "log_group": "/trainium/jobs",
    "log_stream": "trainium/trainer/0f1e2d3c",
    "spec_hash": "not a link field",
}


def record(backend: str = "ecs", **details) -> dict:
    arn = "arn:aws:ecs:eu-west-1:1:task/trainium/0f1e2d3c"
    return job_record(JobHandle(backend, arn, "job", {**DETAILS, **details}))


def test_task_and_log_links():
    assert ecs_task_url(record()) == (
        "https://console.aws.amazon.com/ecs/v2/clusters/trainium/tasks/0f1e2d3c/configuration?region=eu-west-1"
    )
    assert ecs_log_url(record()) == (
        "https://console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/"
        "%2Ftrainium%2Fjobs/log-events/trainium%2Ftrainer%2F0f1e2d3c"
    )


def test_record_keeps_only_what_links_need():
    assert "spec_hash" not in record() and record()["kind"] == "ecs"


def test_other_partitions_use_their_console():
    assert ecs_task_url(record(partition="aws-cn", region_name="cn-north-1")).startswith(
        "https://console.amazonaws.cn/ecs/v2/clusters/trainium/"
    )


def test_no_link_for_jobs_that_did_not_run_on_ecs():
    assert ecs_task_url(record("batch")) == "" and ecs_log_url(record("local")) == ""
    assert ecs_log_url(record(log_stream=None)) == ""
    assert ecs_task_url({"kind": None}) == ""
