"""Wait on an AWS Batch job in the triggerer: a thin shell over :class:`BatchJobWatch`.

The loop (shared DescribeJobs poll, every node's log, deadline and budget stops) lives in
:mod:`airflow_provider_trainium.compute.batch.watch`; the worker-side wait runs the same loop. A user
killing the task terminates the job (``on_kill``); a triggerer restart does not (``cleanup`` leaves it).
"""

from __future__ import annotations

from typing import Any

from airflow_provider_trainium.compute.batch.status import DEFAULT_LOG_GROUP
from airflow_provider_trainium.compute.batch.watch import BatchJobWatch
from airflow_provider_trainium.triggers.base import JobWatchTrigger


class TrainiumBatchJobTrigger(JobWatchTrigger):
    """Fires one event (``JobEvent.to_dict()``) when a Batch job ends, its deadline passes or its budget runs out.

    :param deadline: absolute epoch seconds; the job is terminated then.
    :param budget: ``{"max_cost_usd", "cost_per_hour_usd"}``: the job is terminated once it costs more.
    """

    watch_class = BatchJobWatch

    def __init__(
        self,
        *,
        handle: dict[str, Any],
        deadline: float,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        num_nodes: int = 1,
        log_group: str | None = None,
        poll_interval: float = 30.0,
        log_interval: float = 30.0,
        stream_logs: bool = True,
        log_cursor_uri: str | None = None,
        budget: dict[str, float] | None = None,
    ) -> None:
        super().__init__()
        self.handle = handle
        self.deadline = float(deadline)
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.num_nodes = int(num_nodes)
        self.log_group = log_group or DEFAULT_LOG_GROUP
        self.poll_interval = float(poll_interval)
        self.log_interval = float(log_interval)
        self.stream_logs = stream_logs
        #: Where the log position survives a triggerer restart; None: kept in memory only.
        self.log_cursor_uri = log_cursor_uri
        self.budget = budget


#: The name deferred tasks of earlier releases stored; a running deployment resumes them through it.
BatchJobTrigger = TrainiumBatchJobTrigger
