"""Extra links for a Batch job: its console page and the CloudWatch log stream of each node.

They read the record of :mod:`~airflow_provider_trainium.links.record`; the operator adds each node's
stream to it when the trigger has found the streams.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from airflow_provider_trainium.links.record import RecordLink, console

#: Nodes that get their own log link; larger jobs list every stream on the job's console page.
MAX_LINKED_NODES = 8
DEFAULT_LOG_GROUP = "/aws/batch/job"


def _cw_escape(value: str) -> str:
    """CloudWatch console fragments escape '/' as '$252F' (URL-encoding twice, '%' as '$')."""
    return quote(quote(value, safe=""), safe="").replace("%", "$")


def batch_job_url(record: dict[str, Any]) -> str:
    base = console(record)
    if record.get("kind") != "batch" or not base or not record.get("job_id"):
        return ""
    region = record["region_name"]
    return f"{base}/batch/home?region={region}#jobs/detail/{quote(record['job_id'], safe='')}"


def batch_node_log_url(record: dict[str, Any], node: int) -> str:
    base = console(record)
    stream = (record.get("log_streams") or {}).get(str(node))
    if record.get("kind") != "batch" or not base or not stream:
        return ""
    region, group = record["region_name"], record.get("log_group") or DEFAULT_LOG_GROUP
    return (
        f"{base}/cloudwatch/home?region={region}#logsV2:log-groups/log-group/"
        f"{_cw_escape(group)}/log-events/{_cw_escape(stream)}"
    )


class BatchJobLink(RecordLink):
    """The AWS Batch console page of the job (all nodes, attempts and status reasons)."""

    name = "AWS Batch job"
    kind = "batch"
    url = staticmethod(batch_job_url)


class BatchNodeLogsLink(RecordLink):
    """The CloudWatch log stream of one node of the job. A plain class, as the ECS links are: ``attrs`` would
    generate its methods while every DAG file that uses the job operator is parsed."""

    kind = "batch"

    def __init__(self, node: int = 0) -> None:
        self.node = node

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.node == self.node

    def __repr__(self) -> str:
        return f"{type(self).__name__}(node={self.node})"

    @property
    def name(self) -> str:
        return f"CloudWatch logs: node {self.node}"

    @property
    def xcom_key(self) -> str:
        return f"_link_{type(self).__name__}_{self.node}"

    def url(self, record: dict[str, Any]) -> str:
        return batch_node_log_url(record, self.node)


def batch_links() -> tuple[RecordLink, ...]:
    return (BatchJobLink(), *(BatchNodeLogsLink(node=i) for i in range(MAX_LINKED_NODES)))
