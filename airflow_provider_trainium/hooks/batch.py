"""The amazon provider's Batch hook, with the few calls our backend makes in one place."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from airflow.providers.amazon.aws.hooks.batch_client import BatchClientHook

DESCRIBE_JOBS_MAX = 100  # DescribeJobs takes at most 100 job ids per call


class TrainiumBatchHook(BatchClientHook):
    """``BatchClientHook`` plus paginated look-ups by name; endpoints come from the AWS connection."""

    @property
    def batch(self) -> Any:
        """The boto3 Batch client: the amazon provider types ``client`` as its ``BatchProtocol``, which names only
        the calls its own operators make (no paginators, no queue look-ups)."""
        return self.client

    def list_jobs_named(self, job_queue: str, job_name: str) -> Iterator[dict[str, Any]]:
        """Every job with this exact name in the queue, whatever its status (a name filter ignores status)."""
        paginator = self.batch.get_paginator("list_jobs")
        pages = paginator.paginate(jobQueue=job_queue, filters=[{"name": "JOB_NAME", "values": [job_name]}])
        for page in pages:
            for summary in page.get("jobSummaryList", []):
                if summary.get("jobName") == job_name:
                    yield summary

    def describe_jobs(self, job_ids: list[str]) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = []
        for start in range(0, len(job_ids), DESCRIBE_JOBS_MAX):
            jobs += self.client.describe_jobs(jobs=job_ids[start : start + DESCRIBE_JOBS_MAX]).get("jobs", [])
        return jobs

    def active_definition(self, name: str) -> dict[str, Any] | None:
        """The newest ACTIVE revision of the job definition ``name``, if any."""
        found: list[dict[str, Any]] = []
        paginator = self.batch.get_paginator("describe_job_definitions")
        for page in paginator.paginate(jobDefinitionName=name, status="ACTIVE"):
            found += page.get("jobDefinitions", [])
        return max(found, key=lambda d: d["revision"]) if found else None
