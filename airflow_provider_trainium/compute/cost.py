"""What a job cost: instance-hours from the AWS records times the hourly price, and the local estimate.

Batch bills each node of a multi-node job from its own start to its own stop, so the cost sums the node
jobs' attempts (``<id>#<i>``); a single-node job sums its attempts; an ECS task runs from ``startedAt`` to
``stoppedAt``. A job still running is costed up to ``now``: the same call gives the cost so far. Local
compute costs nothing; its record carries the estimate for the instance layout the run stands in for.
The record is the ``trainium_cost`` XCom value (see docs/cost.md); the pure functions read describe
responses, :func:`job_cost` fetches them with the backend's own hook.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.neuron.pricing import Price, load_prices, price_of, prices_for

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle
    from airflow_provider_trainium.neuron.spec import JobSpec

COST_PER_HOUR_ENV = "TRAINIUM_COST_PER_HOUR_USD"
COST_IS_ESTIMATE_ENV = "TRAINIUM_COST_IS_ESTIMATE"
#: (start, stop) in unix seconds; stop is None while it runs.
Interval = tuple[float, float | None]


def _seconds(value: Any) -> float | None:
    """A describe timestamp as unix seconds: Batch gives epoch milliseconds, boto3's ECS a datetime (or ISO text)."""
    if value is None:
        return None
    if isinstance(value, str):  # a describe response that went through JSON (XCom, trigger events)
        value = datetime.fromisoformat(value)
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / 1000.0
    raise ValueError(f"not a timestamp: {value!r}")


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


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

    A multi-node job whose node jobs are not (or no longer) described is counted as ``numNodes`` nodes over
    the parent's own intervals.
    """
    nodes = [iv for node in node_jobs for iv in batch_job_intervals(node)]
    if nodes:
        return nodes
    count = int((job.get("nodeProperties") or {}).get("numNodes") or 1)
    return batch_job_intervals(job) * count


def ecs_intervals(task: Mapping[str, Any]) -> list[Interval]:
    """An ECS task's one interval: ``startedAt`` (the containers started) to ``stoppedAt``."""
    own = _interval(task)
    return [own] if own else []


def cost_record(
    intervals: list[Interval],
    *,
    instance_type: str,
    nodes: int,
    price: Price,
    local: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """The ``trainium_cost`` record for node intervals: price x node-hours, or 0 and the estimate on local."""
    now = time.time() if now is None else now
    closed = [(s, e if e is not None else max(s, now)) for s, e in intervals]
    running = any(e is None for _, e in intervals)
    started = min((s for s, _ in closed), default=None)
    stopped = None if running or not closed else max(e for _, e in closed)
    wall_s = 0.0 if started is None else max(0.0, (stopped if stopped is not None else now) - started)
    node_s = sum(max(0.0, e - s) for s, e in closed)
    figure = round(price.usd_per_hour * node_s / 3600.0, 4)
    return {
        "usd": 0.0 if local else figure,
        "estimate_usd": figure,
        "is_estimate": local,
        "nodes": nodes,
        "instance_type": instance_type,
        "price_per_node_hour_usd": price.usd_per_hour,
        "price_date": price.as_of,
        "wall_s": round(wall_s, 3),
        "started_at": _iso(started),
        "stopped_at": _iso(stopped),
    }


def local_cost(
    instance_type: str,
    nodes: int,
    started_at: float | None,
    stopped_at: float | None,
    prices: Mapping[str, Price] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """A local run: 0 USD, and what ``nodes`` x ``instance_type`` would have cost over the same wall time."""
    intervals: list[Interval] = [] if started_at is None else [(started_at, stopped_at)] * nodes
    price = price_of(instance_type, prices)
    return cost_record(intervals, instance_type=instance_type, nodes=nodes, price=price, local=True, now=now)


def job_cost(
    backend: ComputeBackend,
    handle: JobHandle,
    spec: JobSpec,
    *,
    prices: Mapping[str, Price] | None = None,
    started_at: float | None = None,
    stopped_at: float | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The cost record of a submitted job, read from the service that ran it (cost so far while it runs).

    ``started_at``/``stopped_at`` (unix seconds) are the caller's own clock, used only for local jobs.
    """
    config = getattr(backend, "config", None)
    table = prices if prices is not None else (prices_for(config) if config is not None else load_prices())
    price = price_of(spec.instance_type, table)
    intervals = backend.billed_intervals(handle)
    if intervals is None:  # a backend that bills nothing: the estimate over the caller's clock
        return local_cost(spec.instance_type, spec.nodes, started_at, stopped_at, table, now)
    return cost_record(intervals, instance_type=spec.instance_type, nodes=spec.nodes, price=price, now=now)


def cost_environment(spec: JobSpec, backend_name: str, prices: Mapping[str, Price] | None = None) -> dict[str, str]:
    """The two variables every job gets: the whole job's hourly rate, and whether it is only an estimate."""
    rate = price_of(spec.instance_type, prices).usd_per_hour * spec.nodes
    return {
        COST_PER_HOUR_ENV: f"{rate:.6g}",
        COST_IS_ESTIMATE_ENV: "1" if backend_name == "local" else "0",
    }
