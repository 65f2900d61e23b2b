"""Extra links from a task to its ECS task and to the task's CloudWatch log stream."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, quote_plus

from airflow_provider_trainium.links.record import RecordLink, console


def ecs_task_url(record: dict[str, Any]) -> str:
    base = console(record)
    if record.get("kind") != "ecs" or not base or not record.get("cluster") or not record.get("task_id"):
        return ""
    cluster = quote(record["cluster"].rsplit("/", 1)[-1], safe="")
    return (
        f"{base}/ecs/v2/clusters/{cluster}/tasks/{quote(record['task_id'], safe='')}"
        f"/configuration?region={record['region_name']}"
    )


def ecs_log_url(record: dict[str, Any]) -> str:
    base = console(record)
    if record.get("kind") != "ecs" or not base or not record.get("log_group") or not record.get("log_stream"):
        return ""
    return (
        f"{base}/cloudwatch/home?region={record['region_name']}#logsV2:log-groups/log-group/"
        f"{quote_plus(record['log_group'])}/log-events/{quote_plus(record['log_stream'])}"
    )


class EcsTaskLink(RecordLink):
    name = "ECS task"
    kind = "ecs"
    url = staticmethod(ecs_task_url)


class EcsTaskLogLink(RecordLink):
    name = "ECS task log (CloudWatch)"
    kind = "ecs"
    url = staticmethod(ecs_log_url)


def ecs_links() -> tuple[RecordLink, ...]:
    """The links of an ECS job (the backend table lists this function for ``ecs``)."""
    return (EcsTaskLink(), EcsTaskLogLink())
