"""One DescribeTasks poll shared by every ECS task of a cluster watched in an event loop (see :mod:`..poller`)."""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.poller import SharedPoller


class EcsTaskPoller(SharedPoller):
    """ceil(tasks / 100) DescribeTasks per interval for every task of one cluster the loops of an event loop
    wait on (DescribeTasks takes one cluster and up to 100 tasks)."""

    service = "ecs"

    def __init__(self, aws_conn_id: str | None, region_name: str | None, interval: float, cluster: str = "",
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(aws_conn_id, region_name, interval, **kwargs)
        self.cluster = cluster

    @classmethod
    def shared(cls, aws_conn_id: str | None, region_name: str | None, interval: float, cluster: str) -> EcsTaskPoller:
        return cls._shared(aws_conn_id, region_name, interval, cluster)

    def _hook(self, service: str) -> Any:
        if service == "ecs":
            from airflow.providers.amazon.aws.hooks.ecs import EcsHook

            return EcsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        return super()._hook(service)

    async def _describe_chunk(self, client: Any, ids: list[str]) -> dict[str, dict[str, Any]]:
        response = await client.describe_tasks(cluster=self.cluster, tasks=ids)
        return {task["taskArn"]: task for task in response.get("tasks") or []}
