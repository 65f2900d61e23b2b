"""A run on a capacity reservation is checked against the queue or cluster its reservation maps to.

The connection's ``capacity_reservations`` routes the job (``compute.reservations``); the preflight swaps the
mapped queue (Batch) or cluster and capacity provider (ECS) into the config, so the queue, compute environment,
cluster and capacity checks look where the job will go, not at the default ones. The reservation's own state
(active, free instances, a Capacity Block's window) is EC2's and is not checked.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from airflow_provider_trainium.preflight.layout import Layout

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig


def routed_config(config: TrainiumConfig, layout: Layout) -> TrainiumConfig:
    """``config`` with the reservation's queue or cluster in place of the default; ValueError naming the
    reservation and the field when the connection has no usable entry for it. Unchanged without a reservation
    and on local compute (which ignores it)."""
    if not layout.capacity_reservation or not layout.remote:
        return config
    from airflow_provider_trainium.compute.reservations import reservation_route

    route = reservation_route(config, layout.capacity_reservation, layout.compute)
    if layout.compute == "batch":
        queues = {**config.batch_job_queues, layout.instance_type: str(route.batch_job_queue)}
        return dataclasses.replace(config, batch_job_queues=queues)
    if layout.compute == "ecs":
        return dataclasses.replace(
            config, ecs_cluster=route.ecs_cluster, ecs_capacity_provider=route.ecs_capacity_provider
        )
    return config
