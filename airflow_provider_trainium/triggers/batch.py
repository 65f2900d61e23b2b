"""Wait on an AWS Batch job in the triggerer: a thin shell over :class:`BatchJobWatch`.

The loop (shared DescribeJobs poll, every node's log, deadline and budget stops) lives in
:mod:`airflow_provider_trainium.compute.batch.watch`; the worker-side wait runs the same loop. A user
killing the task terminates the job (``on_kill``); a triggerer restart does not (``cleanup`` leaves it).
"""

from __future__ import annotations

from airflow_provider_trainium.compute.batch.watch import BatchJobWatch
from airflow_provider_trainium.triggers.base import JobWatchTrigger


class TrainiumBatchJobTrigger(JobWatchTrigger):
    """Fires one event (``JobEvent.to_dict()``) when a Batch job ends, its deadline passes or its budget runs out.

    :param watch: the :class:`BatchJobWatch` arguments (handle, absolute deadline, connection, nodes, log group,
        poll and log intervals, log cursor, budget); a row of an earlier release passes them as separate kwargs.
    """

    watch_class = BatchJobWatch


#: The name deferred tasks of earlier releases stored; a running deployment resumes them through it.
BatchJobTrigger = TrainiumBatchJobTrigger
