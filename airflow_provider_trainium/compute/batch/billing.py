"""What AWS Batch bills for a job: every attempt of every node, read from a DescribeJobs description.

Batch bills each node of a multi-node job from its own start to its own stop, so the intervals are the node
jobs' attempts (``<id>#<i>``); a single-node job's are its own attempts. The watch loop reads them from the
descriptions it already has as the job ends; :func:`described_intervals` asks Batch when nobody watched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from airflow_provider_trainium.compute.base import Interval
from airflow_provider_trainium.compute.batch.status import node_job_ids


def _seconds(value: Any) -> float | None:
    """Batch reports epoch milliseconds."""
    return None if value is None else float(value) / 1000.0


def _interval(record: Mapping[str, Any]) -> Interval | None:
    start = _seconds(record.get("startedAt"))
    return None if start is None else (start, _seconds(record.get("stoppedAt")))


def batch_job_intervals(job: Mapping[str, Any]) -> list[Interval]:
    """The intervals one Batch job (or node job) ran: each attempt's, else the job's own start and stop."""
    attempts = [iv for iv in (_interval(a) for a in job.get("attempts") or []) if iv is not None]
    if attempts:  # an attempt without its own stop ends with the job, or still runs
        return [(s, e if e is not None else _seconds(job.get("stoppedAt"))) for s, e in attempts]
    own = _interval(job)
    return [own] if own else []


def batch_intervals(job: Mapping[str, Any], node_jobs: Iterable[Mapping[str, Any]] = ()) -> list[Interval]:
    """Every node's intervals of a Batch job: the node jobs' where Batch reports them.

    A node job not yet marked stopped when its job has stopped ends with the job. A multi-node job whose node
    jobs are not (or no longer) described is counted as ``numNodes`` nodes over the parent's own intervals.
    """
    end = _seconds(job.get("stoppedAt"))
    nodes = [(s, e if e is not None else end) for node in node_jobs for s, e in batch_job_intervals(node)]
    if nodes:
        return nodes
    return batch_job_intervals(job) * node_count(job)


def node_count(job: Mapping[str, Any]) -> int:
    return int((job.get("nodeProperties") or {}).get("numNodes") or 1)


def described_intervals(describe: Any, job_id: str) -> list[Interval]:
    """Ask Batch: ``describe`` is a hook's ``describe_jobs(ids) -> [job]`` (the job, then its node jobs)."""
    jobs = describe([job_id])
    if not jobs:
        raise ValueError(f"AWS Batch does not know job {job_id}: its cost cannot be read")
    nodes = int((jobs[0].get("nodeProperties") or {}).get("numNodes") or 0)
    node_jobs = describe(node_job_ids(job_id, nodes)) if nodes else []
    return batch_intervals(jobs[0], node_jobs)
