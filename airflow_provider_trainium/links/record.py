"""The one XCom record every extra link of this provider reads.

Airflow computes each extra link at the end of every try, and reading an XCom key that was never pushed
logs an ERROR. So each operator with links pushes this record before it does anything (``kind`` None: no
job yet) and replaces it once the job or image is known; a link whose ``kind`` differs renders empty.
Imports nothing from AWS: DAG files that use the operators stay light.
"""

from __future__ import annotations

from typing import Any, ClassVar

from airflow.providers.common.compat.sdk import BaseOperatorLink, XCom

LINKS_XCOM_KEY = "trainium_links"
#: AWS partition -> console domain. Kept here rather than taken from botocore so DAG files stay light.
CONSOLE_DOMAINS = {"aws": "aws.amazon.com", "aws-cn": "amazonaws.cn", "aws-us-gov": "amazonaws-us-gov.com"}


def console(record: dict[str, Any]) -> str | None:
    """``https://console.<domain>`` for the record's partition, None when it names no region."""
    domain = CONSOLE_DOMAINS.get(record.get("partition") or "aws")
    return f"https://console.{domain}" if domain and record.get("region_name") else None


def job_record(handle: Any, log_streams: dict[str, str] | None = None) -> dict[str, Any]:
    """The record for a job handle (``JobHandle`` or its dict): its backend, id and console details."""
    data = handle if isinstance(handle, dict) else handle.to_dict()
    details = data.get("details") or {}
    record: dict[str, Any] = {"kind": data["backend"], "job_id": data["job_id"]}
    for name in ("region_name", "partition", "cluster", "task_id", "log_group", "log_stream"):
        if details.get(name):
            record[name] = details[name]
    if log_streams:
        record["log_streams"] = {str(k): v for k, v in log_streams.items()}
    return record


def push_record(context: Any, record: dict[str, Any] | None = None) -> None:
    context["ti"].xcom_push(key=LINKS_XCOM_KEY, value=record or {"kind": None})


class RecordLink(BaseOperatorLink):
    """A link built from the record when its ``kind`` is this link's; empty otherwise."""

    kind: ClassVar[str]

    def url(self, record: dict[str, Any]) -> str:
        raise NotImplementedError

    def read_record(self, ti_key: Any) -> Any:
        """The task instance's link record (always pushed before the task does anything)."""
        return XCom.get_value(key=LINKS_XCOM_KEY, ti_key=ti_key)

    def render(self, record: Any) -> str:
        """This link's URL for ``record``; "" for a record of another backend, no job yet, or no record."""
        if not isinstance(record, dict) or record.get("kind") != self.kind:
            return ""
        return self.url(record)

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        return self.render(self.read_record(ti_key))
