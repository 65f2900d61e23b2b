"""The live metrics stream a training job writes under ``<output_uri>/stream/``, read back for the view.

Layout (written by the trainer): ``<output_uri>/stream/<source>/<seq>.jsonl``, ``<source>`` being ``train`` (rank 0's
step records) or ``monitor-node<N>`` (device and host samples of node N), ``<seq>`` a zero-padded chunk number.
Every record carries ``"v": 1``; unknown keys and kinds are ignored so newer writers stay readable.
"""

from __future__ import annotations

import json
import math
from typing import Any

STREAM_DIR = "stream"
TRAIN_SOURCE = "train"


def artifact_path(uri: str, aws_conn_id: str | None = None) -> Any:
    """The one place the view opens artifacts: ``file://`` or ``s3://`` through the trainium connection's AWS one."""
    from airflow.sdk import ObjectStoragePath

    if aws_conn_id and uri.startswith("s3://"):
        return ObjectStoragePath(uri, conn_id=aws_conn_id)
    return ObjectStoragePath(uri)


def read_stream(output_uri: str, aws_conn_id: str | None = None) -> dict[str, list[dict[str, Any]]] | None:
    """Every record per source, in chunk and line order; None when the run has no stream folder at all."""
    root = artifact_path(f"{output_uri.rstrip('/')}/{STREAM_DIR}", aws_conn_id)
    if not root.exists():
        return None
    sources: dict[str, list[dict[str, Any]]] = {}
    for source in sorted(root.iterdir(), key=lambda p: p.name):
        if not source.is_dir():
            continue
        chunks = sorted((c for c in source.iterdir() if c.name.endswith(".jsonl")), key=lambda c: c.name)
        sources[source.name] = [r for chunk in chunks for r in parse_chunk(chunk.read_text())]
    return sources


def parse_chunk(text: str) -> list[dict[str, Any]]:
    """The chunk's version-1 records; a torn last line (a writer killed mid-flush) is skipped, not fatal."""
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("v") == 1:
            records.append(record)
    return records


def _num(value: Any) -> float | None:
    """A plottable number: JSON has no NaN or infinity, and a chart shows a gap for None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def build_series(sources: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """What the run page plots, as x/y arrays: loss, MFU and eval by step; throughput, NeuronCore and host CPU
    utilization by time.

    Times are seconds since the run's first record, so runs of different days line up for comparison.
    """
    records = [r for recs in sources.values() for r in recs]
    times = [t for r in records if (t := _num(r.get("time"))) is not None]
    t0 = min(times) if times else 0.0
    train = [r for r in sources.get(TRAIN_SOURCE, []) if r.get("kind") == "train"]
    evals = [r for r in sources.get(TRAIN_SOURCE, []) if r.get("kind") == "eval"]

    def elapsed(r: dict[str, Any]) -> float | None:
        t = _num(r.get("time"))
        return None if t is None else round(t - t0, 3)

    series: dict[str, Any] = {
        "loss": {"x": [r.get("step") for r in train], "y": [_num(r.get("loss")) for r in train]},
        "mfu": {"x": [r.get("step") for r in train], "y": [_num(r.get("mfu")) for r in train]},
        "throughput": {
            "x": [elapsed(r) for r in train],
            "samples_per_s": [_num(r.get("samples_per_s")) for r in train],
            "tokens_per_s": [_num(r.get("tokens_per_s")) for r in train],
        },
        "eval": {
            "x": [r.get("step") for r in evals],
            "loss": [_num(r.get("loss")) for r in evals],
            "accuracy": [_num(r.get("accuracy")) for r in evals],
        },
    }
    series["neuroncores"] = _utilization(sources, elapsed)
    series["host"] = _host(sources, elapsed)
    last = train[-1] if train else {}
    series["progress"] = {"step": last.get("step"), "total_steps": last.get("total_steps")}
    return series


def _utilization(sources: dict[str, list[dict[str, Any]]], elapsed: Any) -> dict[str, Any]:
    """Per-NeuronCore utilization (percent), one x point per device record; other nodes' cores are gaps there."""
    device = sorted(
        (r for name, recs in sources.items() if name != TRAIN_SOURCE for r in recs if r.get("kind") == "device"),
        key=lambda r: _num(r.get("time")) or 0.0,
    )
    names: list[str] = []
    for r in device:
        for core in r.get("neuroncores") or {}:
            name = f"node{r.get('node', 0)}/nc{core}"
            if name not in names:
                names.append(name)
    columns: dict[str, list[float | None]] = {name: [None] * len(device) for name in names}
    for i, r in enumerate(device):
        for core, util in (r.get("neuroncores") or {}).items():
            columns[f"node{r.get('node', 0)}/nc{core}"][i] = _num(util)
    return {"x": [elapsed(r) for r in device], "cores": columns}


def _host(sources: dict[str, list[dict[str, Any]]], elapsed: Any) -> dict[str, Any]:
    """Host CPU utilization (percent) per node: where no NeuronCore is sampled (local runs) it is what there is."""
    host = sorted(
        (r for name, recs in sources.items() if name != TRAIN_SOURCE for r in recs if r.get("kind") == "host"),
        key=lambda r: _num(r.get("time")) or 0.0,
    )
    nodes = sorted({int(r.get("node", 0)) for r in host})
    columns: dict[str, list[float | None]] = {f"node{n}": [None] * len(host) for n in nodes}
    for i, r in enumerate(host):
        columns[f"node{int(r.get('node', 0))}"][i] = _num(r.get("cpu_percent"))
    return {"x": [elapsed(r) for r in host], "cpu": columns}
