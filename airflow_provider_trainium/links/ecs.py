"""Extra links from a task to its ECS task and to the task's CloudWatch log stream.

Both read the ``job`` XCom that ``NeuronJobOperator`` pushes once the job is submitted (the job
handle), so they need no XCom of their own and show nothing for jobs that did not run on ECS.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, quote_plus

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom

JOB_XCOM_KEY = "job"
#: AWS partition -> console domain. Kept here rather than imported so DAG files that list these links
#: do not pull botocore in at parse time.
CONSOLE_DOMAINS = {"aws": "aws.amazon.com", "aws-cn": "amazonaws.cn", "aws-us-gov": "amazonaws-us-gov.com"}


def _console(details: dict[str, Any]) -> str | None:
    domain = CONSOLE_DOMAINS.get(details.get("partition") or "aws")
    return f"https://console.{domain}" if domain and details.get("region_name") else None


def ecs_task_url(handle: dict[str, Any]) -> str:
    details = handle.get("details") or {}
    console = _console(details)
    if handle.get("backend") != "ecs" or not console or not details.get("cluster"):
        return ""
    cluster = quote(details["cluster"].rsplit("/", 1)[-1], safe="")
    return (
        f"{console}/ecs/v2/clusters/{cluster}/tasks/{quote(details['task_id'], safe='')}"
        f"/configuration?region={details['region_name']}"
    )


def ecs_log_url(handle: dict[str, Any]) -> str:
    details = handle.get("details") or {}
    console = _console(details)
    if handle.get("backend") != "ecs" or not console or not details.get("log_group") or not details.get("log_stream"):
        return ""
    return (
        f"{console}/cloudwatch/home?region={details['region_name']}#logsV2:log-groups/log-group/"
        f"{quote_plus(details['log_group'])}/log-events/{quote_plus(details['log_stream'])}"
    )


class _JobHandleLink(BaseOperatorLink):
    def url(self, handle: dict[str, Any]) -> str:
        raise NotImplementedError

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        handle = XCom.get_value(key=JOB_XCOM_KEY, ti_key=ti_key)
        return self.url(handle) if isinstance(handle, dict) else ""


class EcsTaskLink(_JobHandleLink):
    name = "ECS task"

    def url(self, handle: dict[str, Any]) -> str:
        return ecs_task_url(handle)


class EcsTaskLogLink(_JobHandleLink):
    name = "ECS task log (CloudWatch)"

    def url(self, handle: dict[str, Any]) -> str:
        return ecs_log_url(handle)
