"""Wait on an ECS training task in the triggerer: a thin shell over :class:`EcsTaskWatch`.

The loop (task status, its log, deadline, placement timeout and budget stops) lives in
:mod:`airflow_provider_trainium.compute.ecs.watch`; the worker-side wait runs the same loop. ``on_kill``
stops the task when a user kills the deferred task; ``cleanup`` does not (it also runs on triggerer restart).
"""

from __future__ import annotations

from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.triggers.base import JobWatchTrigger


class TrainiumEcsTaskTrigger(JobWatchTrigger):
    """Fires one event (``JobEvent.to_dict()``) when the ECS task ends, its deadline passes or it never starts.

    :param watch: the :class:`EcsTaskWatch` arguments (handle, absolute deadline, connection, poll interval,
        placement timeout, log cursor, budget); a row of an earlier release passes them as separate kwargs.
    """

    watch_class = EcsTaskWatch


#: The name deferred tasks of earlier releases stored; a running deployment resumes them through it.
EcsTaskTrigger = TrainiumEcsTaskTrigger
