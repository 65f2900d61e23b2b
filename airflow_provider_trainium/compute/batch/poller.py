"""One DescribeJobs poll shared by every Batch job watched in an event loop (see :mod:`..poller`)."""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.poller import SharedPoller


class BatchJobPoller(SharedPoller):
    """ceil(ids / 100) DescribeJobs per interval for every Batch job the loops of one event loop wait on."""

    service = "batch"

    @classmethod
    def shared(cls, aws_conn_id: str | None, region_name: str | None, interval: float) -> BatchJobPoller:
        return cls._shared(aws_conn_id, region_name, interval)

    def _hook(self, service: str) -> Any:
        if service == "batch":
            from airflow_provider_trainium.hooks.batch import TrainiumBatchHook

            return TrainiumBatchHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        return super()._hook(service)

    async def _describe_chunk(self, client: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
        response = await client.describe_jobs(jobs=ids)
        return {job["jobId"]: job for job in response.get("jobs", [])}
