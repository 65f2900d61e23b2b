"""The live metrics stream a training job writes under ``<output_uri>/stream/``, read back for the view.

Layout, record format and reader rule belong to ``trainer.boundary`` (the one module of the trainer the provider
imports): ``<output_uri>/stream/<source>/<seq>.jsonl``, ``<source>`` being ``train`` (rank 0's step records)
or ``monitor-node<N>`` (device and host samples of node N). Chunks are parsed by ``boundary.parse_chunk``, the
trainer's own reader, so a torn last line is skipped here exactly as there. Every file is read through
``artifacts`` (``s3://`` with the trainium connection's AWS connection).
"""

from __future__ import annotations

import math
from typing import Any

from airflow_provider_trainium import artifacts
from trainer import boundary

STREAM_DIR = boundary.STREAM_DIR
TRAIN_SOURCE = boundary.TRAIN_SOURCE


def read_stream(output_uri: str, aws_conn_id: str | None = None) -> dict[str, list[dict[str, Any]]] | None:
    """Every record per source, in chunk and line order; None when the run has no stream folder at all.

    A chunk that breaks the reader rule raises ``boundary.StreamFormatError``.
    """
    root = f"{artifacts.normalize(output_uri)}/{STREAM_DIR}"
    if not artifacts.exists(root, aws_conn_id=aws_conn_id):
        return None
    return {
        source.rsplit("/", 1)[-1]: read_source(source, aws_conn_id)
        for source in artifacts.list_uris(root, aws_conn_id=aws_conn_id, kind="dir")
    }


def read_source(source_uri: str, aws_conn_id: str | None = None) -> list[dict[str, Any]]:
    """One source's records: its chunks oldest first, each parsed by the trainer's reader rule."""
    chunks = {uri.rsplit("/", 1)[-1]: uri for uri in artifacts.list_uris(source_uri, aws_conn_id=aws_conn_id)}
    records: list[dict[str, Any]] = []
    for name in boundary.chunk_order(list(chunks)):
        data = artifacts.read_bytes(chunks[name], aws_conn_id=aws_conn_id) or b""
        records.extend(boundary.parse_chunk(data, chunks[name]))
    return records


def _of_kind(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get(boundary.KEY_KIND) == kind]


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
    times = [t for r in records if (t := _num(r.get(boundary.KEY_TIME))) is not None]
    t0 = min(times) if times else 0.0
    train = _of_kind(sources.get(TRAIN_SOURCE, []), boundary.KIND_TRAIN)
    evals = _of_kind(sources.get(TRAIN_SOURCE, []), boundary.KIND_EVAL)

    def elapsed(r: dict[str, Any]) -> float | None:
        t = _num(r.get(boundary.KEY_TIME))
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
        (r for name, recs in sources.items() if name != TRAIN_SOURCE for r in _of_kind(recs, boundary.KIND_DEVICE)),
        key=lambda r: _num(r.get(boundary.KEY_TIME)) or 0.0,
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
        (r for name, recs in sources.items() if name != TRAIN_SOURCE for r in _of_kind(recs, boundary.KIND_HOST)),
        key=lambda r: _num(r.get(boundary.KEY_TIME)) or 0.0,
    )
    nodes = sorted({int(r.get("node", 0)) for r in host})
    columns: dict[str, list[float | None]] = {f"node{n}": [None] * len(host) for n in nodes}
    for i, r in enumerate(host):
        columns[f"node{int(r.get('node', 0))}"][i] = _num(r.get("cpu_percent"))
    return {"x": [elapsed(r) for r in host], "cpu": columns}
