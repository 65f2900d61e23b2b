"""Wait on an ECS training task in the triggerer: a thin shell over :class:`EcsTaskWatch`.

The loop (task status, its log, deadline, placement timeout and budget stops) lives in
:mod:`airflow_provider_trainium.compute.ecs.watch`; the worker-side wait runs the same loop. ``on_kill``
stops the task when a user kills the deferred task; ``cleanup`` does not (it also runs on triggerer restart).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.triggers.base import JobWatchTrigger


class TrainiumEcsTaskTrigger(JobWatchTrigger):
    """Fires one event (``JobEvent.to_dict()``) when the ECS task ends, its deadline passes or it never starts.

    :param handle: ``JobHandle.to_dict()`` of the task; ``details`` holds cluster, log group and stream.
    :param deadline: epoch seconds after which the task is stopped and the job fails.
    :param placement_timeout: seconds a task may stay PROVISIONING/PENDING after it was created.
    :param budget: ``{"max_cost_usd", "cost_per_hour_usd"}``: the task is stopped once it costs more.
    """

    watch_class = EcsTaskWatch

    def __init__(
        self,
        handle: dict[str, Any],
        deadline: float,
        aws_conn_id: str | None,
        region_name: str | None = None,
        poll_interval: float = 30.0,
        placement_timeout: float = 1800.0,
        log_cursor_uri: str | None = None,
        budget: dict[str, float] | None = None,
    ) -> None:
        super().__init__()
        self.handle = handle
        self.deadline = float(deadline)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.poll_interval = float(poll_interval)
        self.placement_timeout = float(placement_timeout)
        #: Where the log position survives a triggerer restart; None: kept in memory only.
        self.log_cursor_uri = log_cursor_uri
        self.budget = budget


#: The name deferred tasks of earlier releases stored; a running deployment resumes them through it.
EcsTaskTrigger = TrainiumEcsTaskTrigger
