"""Console links built from the job handle the operator pushes as its ``job`` XCom."""

from __future__ import annotations

from airflow_provider_trainium.compute.base import JobHandle
from airflow_provider_trainium.links.ecs import ecs_log_url, ecs_task_url

DETAILS = {
    "cluster": "trainium",
    "task_id": "0f1e2d3c",
    "region_name": "eu-west-1",
    "partition": "aws",
    "log_group": "/trainium/jobs",
    "log_stream": "trainium/trainer/0f1e2d3c",
}


def handle(backend: str = "ecs", **details) -> dict:
    return JobHandle(backend, "arn:aws:ecs:eu-west-1:1:task/trainium/0f1e2d3c", "job", {**DETAILS, **details}).to_dict()


def test_task_and_log_links():
    assert ecs_task_url(handle()) == (
        "https://console.aws.amazon.com/ecs/v2/clusters/trainium/tasks/0f1e2d3c/configuration?region=eu-west-1"
    )
    assert ecs_log_url(handle()) == (
        "https://console.aws.amazon.com/cloudwatch/home?region=eu-west-1#logsV2:log-groups/log-group/"
        "%2Ftrainium%2Fjobs/log-events/trainium%2Ftrainer%2F0f1e2d3c"
    )


def test_other_partitions_use_their_console():
    assert ecs_task_url(handle(partition="aws-cn", region_name="cn-north-1")).startswith(
        "https://console.amazonaws.cn/ecs/v2/clusters/trainium/"
    )


def test_no_link_for_jobs_that_did_not_run_on_ecs():
    assert ecs_task_url(handle("batch")) == "" and ecs_log_url(handle("local")) == ""
    assert ecs_log_url(handle(log_stream=None)) == ""
