"""What a job cost: the node intervals the platform billed times the hourly price, and the local estimate.

Each backend reads its own platform's intervals (``compute/batch/billing.py``: every attempt of every node
job; ``compute/ecs/billing.py``: the task's ``startedAt`` to ``stoppedAt``); this module only prices them.
A job still running is costed up to ``now``: the same call gives the cost so far. Local compute costs
nothing; its record carries the estimate for the instance layout the run stands in for. The record is the
``trainium_cost`` XCom value (see docs/cost.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.compute.base import Interval
from airflow_provider_trainium.neuron.pricing import Price, load_prices, price_of, prices_for
from trainium_trainer import boundary

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend, JobHandle
    from airflow_provider_trainium.neuron.spec import JobSpec

COST_PER_HOUR_ENV = boundary.ENV_COST_PER_HOUR_USD
COST_IS_ESTIMATE_ENV = boundary.ENV_COST_IS_ESTIMATE


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


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
    billed: Iterable[Interval] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """The cost record of a submitted job (the cost so far while it runs).

    ``billed``: the intervals the watch loop saw as the job ended (``JobStatus.billed_intervals``); without
    them the backend asks its platform. A backend that bills nothing is estimated from its handle's
    ``started_at`` to ``now``. ``prices``: default, the table of the backend's connection.
    """
    now = time.time() if now is None else now
    config = getattr(backend, "config", None)
    table = prices if prices is not None else (prices_for(config) if config is not None else load_prices())
    intervals = list(billed) if billed is not None else backend.billed_intervals(handle)
    if intervals is None:  # a backend that bills nothing: the estimate over its own clock
        started = handle.details.get("started_at")
        start = None if started is None else float(started)
        return local_cost(spec.instance_type, spec.nodes, start, now, table, now)
    price = price_of(spec.instance_type, table)
    return cost_record(intervals, instance_type=spec.instance_type, nodes=spec.nodes, price=price, now=now)


def cost_line(record: Mapping[str, Any]) -> str:
    """The task log's line for a cost record: the figure, the estimate on local compute, the price date."""
    estimate = f" (est. ${record['estimate_usd']:.2f} as {record['nodes']} x {record['instance_type']})"
    return (
        f"cost: ${record['usd']:.2f}{estimate if record['is_estimate'] else ''}, {record['wall_s']:.0f}s, "
        f"prices of {record['price_date']}"
    )


def cost_environment(spec: JobSpec, backend_name: str, prices: Mapping[str, Price] | None = None) -> dict[str, str]:
    """The two variables every job gets: the whole job's hourly rate, and whether it is only an estimate."""
    rate = price_of(spec.instance_type, prices).usd_per_hour * spec.nodes
    return {
        COST_PER_HOUR_ENV: f"{rate:.6g}",
        COST_IS_ESTIMATE_ENV: "1" if backend_name == "local" else "0",
    }


def with_cost_environment(spec: JobSpec, backend_name: str, prices: Mapping[str, Price] | None = None) -> JobSpec:
    """``spec`` with its cost variables set last: the job's own env never overrides the rate its progress line
    and its budget stop use."""
    return spec.with_changes(env={**spec.env, **cost_environment(spec, backend_name, prices)})
