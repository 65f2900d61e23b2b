"""One run's export, gathered once for every tracker: its layout (params), per-step curves, cost and final
evaluation.

The curves come from the live stream through the provider's validated reader (``plugins.stream.read_stream``),
never from the raw files. A step logged twice (a retry that resumed from a checkpoint replays steps) keeps its
last record, so a tracker gets one point per step.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium.neuron.spec import JobSpec
from airflow_provider_trainium.plugins.stream import TRAIN_SOURCE, StreamRead, read_stream
from trainium_trainer import boundary

#: Stream fields exported as curves, per record kind (``<kind>/<field>`` is the metric's name).
CURVES: dict[str, tuple[str, ...]] = {
    boundary.KIND_TRAIN: ("loss", "samples_per_s", "tokens_per_s", "mfu", "lr", "epoch", "xla_graphs"),
    boundary.KIND_EVAL: ("loss", "accuracy"),
}
#: Fields of the ``trainium_cost`` record exported as ``cost/<field>``.
COST_FIELDS = ("usd", "estimate_usd", "wall_s", "usd_per_hour")
#: A param longer than this is cut (trackers bound param values; entry-point args can be long).
MAX_PARAM_CHARS = 500


@dataclass(frozen=True)
class TaskInstanceId:
    """The task instance a run belongs to; ``key`` is what finds the run again on a retry or a rerun."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int = -1
    try_number: int = 1

    @property
    def key(self) -> str:
        """A hash of the four ids (not the try): safe in a tracker's filter and in a file name."""
        text = f"{self.dag_id}\0{self.run_id}\0{self.task_id}\0{self.map_index}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    @property
    def name(self) -> str:
        mapped = f"[{self.map_index}]" if self.map_index >= 0 else ""
        return f"{self.dag_id}.{self.task_id}{mapped} {self.run_id}"

    def tags(self) -> dict[str, str]:
        return {
            "trainium.task_instance": self.key,
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "task_id": self.task_id,
            "map_index": str(self.map_index),
            "try_number": str(self.try_number),
        }


@dataclass(frozen=True)
class Point:
    step: int
    value: float
    #: Unix milliseconds of the record (the stream's ``time``).
    timestamp_ms: int


@dataclass
class RunExport:
    ti: TaskInstanceId
    params: dict[str, str] = field(default_factory=dict)
    #: metric name -> points by step, ascending.
    curves: dict[str, list[Point]] = field(default_factory=dict)
    #: ``cost/*`` and ``final/*``: one value each, logged at the last step.
    scalars: dict[str, float] = field(default_factory=dict)
    #: What the stream reader skipped (for the task log).
    notes: list[str] = field(default_factory=list)

    @property
    def last_step(self) -> int:
        return max((p.step for points in self.curves.values() for p in points), default=0)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _param(value: Any) -> str:
    text = " ".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


def job_params(ti: TaskInstanceId, spec: JobSpec, compute: str) -> dict[str, str]:
    """The job's layout and identity, as trackers show params (strings)."""
    params: dict[str, Any] = {
        "instance_type": spec.instance_type,
        "nodes": spec.nodes,
        "processes_per_node": spec.nproc_per_node,
        "stack": spec.stack,
        "compute": compute,
        "image": spec.image or "",
        "entry_point": spec.entry_point or " ".join(spec.command),
        "args": spec.args,
        "dag_id": ti.dag_id,
        "run_id": ti.run_id,
        "task_id": ti.task_id,
        "map_index": ti.map_index,
    }
    return {name: _param(value) for name, value in params.items()}


def curves(stream: StreamRead | None) -> dict[str, list[Point]]:
    """``train/*`` and ``eval/*`` per step from rank 0's records; the last record of a step wins."""
    by_name: dict[str, dict[int, Point]] = {}
    for record in stream.sources.get(TRAIN_SOURCE, []) if stream is not None else []:
        kind = record.get(boundary.KEY_KIND)
        for name in CURVES.get(str(kind), ()):
            value = _finite(record.get(name))
            if value is not None:
                point = Point(int(record["step"]), value, int(float(record[boundary.KEY_TIME]) * 1000))
                by_name.setdefault(f"{kind}/{name}", {})[point.step] = point
    return {name: [points[s] for s in sorted(points)] for name, points in sorted(by_name.items())}


def scalars(cost: dict[str, Any] | None, summary: dict[str, Any] | None) -> dict[str, float]:
    """``cost/*`` from the cost record and ``final/*`` from every number of the metrics summary."""
    found: dict[str, float] = {}
    for name in COST_FIELDS:
        value = _finite((cost or {}).get(name))
        if value is not None:
            found[f"cost/{name}"] = value
    for name, raw in sorted((summary or {}).items()):
        value = _finite(raw)
        if value is not None:
            found[f"final/{name}"] = value
    return found


def collect(
    ti: TaskInstanceId,
    spec: JobSpec,
    compute: str,
    *,
    artifact_root: str,
    aws_conn_id: str | None,
    cost: dict[str, Any] | None,
    summary: dict[str, Any] | None,
) -> RunExport:
    """What a tracker records of the job: its params, the curves and notes of the stream under its output URI
    (which must lie in the artifact root), and its final scalars."""
    stream = read_stream(spec.output_uri or "", artifact_root, aws_conn_id) if spec.output_uri else None
    return RunExport(
        ti=ti,
        params=job_params(ti, spec, compute),
        curves=curves(stream),
        scalars=scalars(cost, summary),
        notes=list(stream.summary()["notes"]) if stream is not None else [],
    )
