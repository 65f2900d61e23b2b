"""Where a job on a capacity reservation runs: the ``trainium`` connection's ``capacity_reservations``.

Each CloudFormation stack launches into at most one reservation (its ``CapacityReservationId`` parameter), so a
deployment with several reservations runs one stack per reservation, and a job that names a reservation must go
to that stack's Batch queue, or ECS cluster and capacity provider. A reservation the map lacks, or an entry
without what the backend needs, is refused before anything is submitted: the default queue would run the job
at on-demand prices while the reservation sits idle. Only the routing is checked: whether the reservation is
active, has free instances or its Capacity Block window has begun is EC2's to say, and is not asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_trainium.compute.base import JobInputError

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

FIELD = "capacity_reservations"
#: The keys of a reservation's entry each backend reads.
NEEDED_KEYS: dict[str, tuple[str, ...]] = {
    "batch": ("batch_job_queue",),
    "ecs": ("ecs_cluster", "ecs_capacity_provider"),
}
_PLACEHOLDERS = {"batch_job_queue": "<job queue>", "ecs_cluster": "<cluster>", "ecs_capacity_provider": "<provider>"}


class ReservationError(JobInputError):
    """A job's capacity reservation has nowhere to go on this backend: a retry cannot help."""


@dataclass(frozen=True)
class ReservationRoute:
    """The queue, or cluster and capacity provider, of the stack launched into one reservation."""

    reservation: str
    batch_job_queue: str | None = None
    ecs_cluster: str | None = None
    ecs_capacity_provider: str | None = None


def _example(reservation: str, compute: str) -> str:
    return json.dumps({reservation: {key: _PLACEHOLDERS[key] for key in NEEDED_KEYS.get(compute, ())}})


def reservation_route(config: TrainiumConfig, reservation: str, compute: str) -> ReservationRoute:
    """The route of ``reservation`` on backend ``compute`` (``batch`` or ``ecs``); a :class:`ReservationError`
    naming the reservation and the connection field to set when the map has no usable entry for it."""
    entry = config.capacity_reservations.get(reservation)
    if entry is None:
        known = ", ".join(sorted(config.capacity_reservations)) or "none"
        raise ReservationError(
            f"capacity reservation {reservation} is not in the trainium connection's {FIELD} (it has: {known}): "
            f"add the {compute} stack launched into it, e.g. {FIELD} = {_example(reservation, compute)}"
        )
    missing = [key for key in NEEDED_KEYS.get(compute, ()) if not entry.get(key)]
    if missing:
        raise ReservationError(
            f"capacity reservation {reservation} has no {' and '.join(missing)} in the trainium connection's "
            f"{FIELD}[{reservation}], which compute={compute!r} needs: set it from the {compute} stack launched "
            "into the reservation"
        )
    return ReservationRoute(
        reservation,
        batch_job_queue=entry.get("batch_job_queue"),
        ecs_cluster=entry.get("ecs_cluster"),
        ecs_capacity_provider=entry.get("ecs_capacity_provider"),
    )


def mapped_targets(config: TrainiumConfig, key: str) -> set[str]:
    """Every ``key`` (``batch_job_queue``, ``ecs_cluster``) a reservation maps to: an earlier try's job may sit on
    any of them."""
    return {entry[key] for entry in config.capacity_reservations.values() if entry.get(key)}
