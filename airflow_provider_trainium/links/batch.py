"""Extra links for a Batch job: its console page and the CloudWatch log stream of each node.

The operator stores what the links need under one XCom key (:data:`XCOM_KEY`) as soon as the job is
known, and adds each node's stream when the trigger has found it. Imports nothing from AWS: DAG files
that use the operators stay light.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import attrs
from airflow.sdk import BaseOperatorLink

XCOM_KEY = "trainium_batch_job"
#: Nodes that get their own log link; larger jobs list every stream on the job's console page.
MAX_LINKED_NODES = 8
CONSOLE = "https://{region}.console.aws.amazon.com"


def _stored(ti_key: Any) -> dict[str, Any]:
    from airflow.sdk.execution_time.xcom import XCom

    return XCom.get_value(ti_key=ti_key, key=XCOM_KEY) or {}


def job_url(region: str, job_id: str) -> str:
    return f"{CONSOLE.format(region=region)}/batch/home?region={region}#jobs/detail/{job_id}"


def _cw_escape(value: str) -> str:
    """CloudWatch console fragments escape '/' as '$252F' (URL-encoding twice, '%' as '$')."""
    return quote(quote(value, safe=""), safe="").replace("%", "$")


def log_stream_url(region: str, log_group: str, stream: str) -> str:
    return (
        f"{CONSOLE.format(region=region)}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{_cw_escape(log_group)}/log-events/{_cw_escape(stream)}"
    )


def link_data(region: str, job_id: str, log_group: str, log_streams: dict[str, str] | None = None) -> dict[str, Any]:
    return {"region_name": region, "job_id": job_id, "log_group": log_group, "log_streams": dict(log_streams or {})}


@attrs.define
class BatchJobLink(BaseOperatorLink):
    """The AWS Batch console page of the job (all nodes, attempts and status reasons)."""

    name = "AWS Batch job"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        data = _stored(ti_key)
        if not data.get("job_id"):
            return ""
        return job_url(data["region_name"], data["job_id"])


@attrs.define
class BatchNodeLogsLink(BaseOperatorLink):
    """The CloudWatch log stream of one node of the job."""

    node: int = 0

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"CloudWatch logs: node {self.node}"

    @property
    def xcom_key(self) -> str:
        return f"_link_{type(self).__name__}_{self.node}"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        data = _stored(ti_key)
        stream = (data.get("log_streams") or {}).get(str(self.node))
        if not stream:
            return ""
        return log_stream_url(data["region_name"], data["log_group"], stream)


def batch_links() -> tuple[BaseOperatorLink, ...]:
    return (BatchJobLink(), *(BatchNodeLogsLink(node=i) for i in range(MAX_LINKED_NODES)))
