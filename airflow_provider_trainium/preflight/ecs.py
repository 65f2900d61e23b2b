"""The ECS cluster a one-node run lands on: it exists, is ACTIVE, and has somewhere to place a task."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_trainium.hooks.connection_test import check_cluster
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

NAME = "ecs cluster"


def check_ecs_cluster(config: TrainiumConfig) -> CheckResult:
    from airflow.providers.amazon.aws.hooks.ecs import EcsHook

    problem = check_cluster(config)
    if problem:
        return error(NAME, problem)
    hook = EcsHook(aws_conn_id=config.aws_conn_id, region_name=config.region_name)
    cluster = hook.conn.describe_clusters(clusters=[config.ecs_cluster])["clusters"][0]
    instances = int(cluster.get("registeredContainerInstancesCount") or 0)
    providers = list(cluster.get("capacityProviders") or [])
    wanted = config.ecs_capacity_provider
    if wanted and wanted not in providers:
        return error(
            NAME,
            f"ECS cluster {config.ecs_cluster} has no capacity provider {wanted} (the connection's "
            f"ecs_capacity_provider); it has: {', '.join(providers) or 'none'}",
        )
    if not instances and not providers:
        return warning(
            NAME,
            f"ECS cluster {config.ecs_cluster} is ACTIVE but has no container instances and no capacity provider: "
            "a task would wait for capacity that never comes",
        )
    capacity = f"capacity providers {', '.join(providers)}" if providers else f"{instances} container instance(s)"
    return ok(NAME, f"ECS cluster {config.ecs_cluster} is ACTIVE with {capacity}")
