"""The live metrics stream a training job writes under ``<output_uri>/stream/``, read back for the view.

Layout, record format and reader rule belong to ``trainium_trainer.boundary`` (the one module of the trainer the
provider imports): ``<output_uri>/stream/<source>/<seq>.jsonl``, ``<source>`` being ``train`` (rank 0's step records)
or ``monitor-node<N>`` (device and host samples of node N). Chunks are parsed by ``boundary.parse_chunk``, the
trainer's own reader, so a torn last line is skipped here exactly as there.

What the view adds, because anyone who can write under a run's output can write its stream: every URI is
checked by ``artifacts.confined`` (inside the artifact root) before it is opened, and every record is checked
against its kind's field types before it is plotted. A chunk the reader rule refuses, a chunk over
``MAX_CHUNK_BYTES`` and a record of the wrong shape are skipped, each with a note the page shows; the whole
read keeps at most ``MAX_RECORDS`` records (the newest), so one run's page holds bounded memory.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_trainium import artifacts
from trainium_trainer import boundary

STREAM_DIR = boundary.STREAM_DIR
TRAIN_SOURCE = boundary.TRAIN_SOURCE
#: Records one run's read keeps (the newest; split evenly among its sources).
MAX_RECORDS = 20_000
#: A chunk larger than this is skipped (the trainer flushes every few seconds: real chunks are kilobytes).
MAX_CHUNK_BYTES = 8 * 1024 * 1024
#: Sources read per run (one per node plus ``train``).
MAX_SOURCES = 65
#: NeuronCores one device record may name.
MAX_CORES = 1024
#: Notes kept per read; the rest are counted.
MAX_NOTES = 20
#: The y range of the charts in percent: fixed, so a sampled 3 % does not fill the chart like 100 % would.
PERCENT_RANGE = (0, 100)
_SOURCE = re.compile(rf"^(?:{re.escape(TRAIN_SOURCE)}|{re.escape(boundary.MONITOR_SOURCE_PREFIX)}\d{{1,5}})$")
_TRACE = re.compile(r"^trace-rank\d{1,5}\.json$")

_NUMBER = "number"
_INT = "int"
#: kind -> field -> (type, required). Numbers may be null or non-finite (a diverged loss: a gap in the chart);
#: the fields that place a point (step, node) must be present and whole.
FIELD_TYPES: dict[str, dict[str, tuple[str, bool]]] = {
    boundary.KIND_TRAIN: {
        "step": (_INT, True),
        "total_steps": (_INT, False),
        "epoch": (_NUMBER, False),
        **{name: (_NUMBER, False) for name in ("loss", "samples_per_s", "tokens_per_s", "mfu", "lr")},
        "xla_graphs": (_INT, False),
    },
    boundary.KIND_EVAL: {"step": (_INT, True), "loss": (_NUMBER, False), "accuracy": (_NUMBER, False)},
    boundary.KIND_DEVICE: {"node": (_INT, True), "device_mem_used_bytes": (_NUMBER, False)},
    boundary.KIND_HOST: {
        "node": (_INT, True),
        **{name: (_NUMBER, False) for name in ("cpu_percent", "mem_used_bytes", "mem_total_bytes")},
    },
}


@dataclass
class StreamRead:
    """What one run's stream gave: records per source, in chunk and line order, and what was left out."""

    sources: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: int = 0
    capped: bool = False
    max_records: int = MAX_RECORDS

    def note(self, text: str) -> None:
        self.skipped += 1
        if len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def summary(self) -> dict[str, Any]:
        """The notes as the page shows them (JSON)."""
        notes = list(self.notes)
        if self.skipped > len(self.notes):
            notes.append(f"{self.skipped - len(self.notes)} more skipped")
        if self.capped:
            notes.append(
                f"the stream holds more records than the view reads ({self.max_records} a run): showing the newest"
            )
        return {"notes": notes, "capped": self.capped}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_whole(value: Any) -> bool:
    return _is_number(value) and math.isfinite(value) and float(value).is_integer() and abs(value) < 2**53


def record_problem(record: dict[str, Any]) -> str | None:
    """Why ``record`` (a current-version record of a known kind) cannot be plotted; None when it can."""
    if not (_is_number(record.get(boundary.KEY_TIME)) and math.isfinite(record[boundary.KEY_TIME])):
        return "time is not a finite number"
    for name, (kind, required) in FIELD_TYPES[record[boundary.KEY_KIND]].items():
        value = record.get(name)
        if value is None:
            if required:
                return f"{name} is missing"
            continue
        if kind == _INT and not _is_whole(value):
            return f"{name} is not a whole number: {str(value)[:40]!r}"
        if kind == _NUMBER and not _is_number(value):
            return f"{name} is not a number: {str(value)[:40]!r}"
    cores = record.get("neuroncores")
    if record[boundary.KEY_KIND] == boundary.KIND_DEVICE and cores is not None:
        if not isinstance(cores, dict) or len(cores) > MAX_CORES:
            return f"neuroncores is not an object of at most {MAX_CORES} cores"
        if not all(_is_core(c) and (u is None or _is_number(u)) for c, u in cores.items()):
            return "neuroncores maps something other than core numbers to numbers"
    return None


def _is_core(name: Any) -> bool:
    return isinstance(name, str) and name.isascii() and name.isdecimal() and len(name) < 6


def _whole(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with its whole-number fields as ints (``3.0`` plots as step 3)."""
    ints = [n for n, (kind, _) in FIELD_TYPES[record[boundary.KEY_KIND]].items() if kind == _INT]
    return {**record, **{n: int(record[n]) for n in ints if record.get(n) is not None}}


def read_stream(
    output_uri: str, root: str, aws_conn_id: str | None = None, max_records: int = MAX_RECORDS
) -> StreamRead | None:
    """The run's stream; None when it has no stream folder at all.

    ``output_uri`` must be inside the artifact ``root`` (``artifacts.ArtifactURIError`` otherwise, before any
    request).
    """
    base = f"{artifacts.confined(output_uri, root)}/{STREAM_DIR}"
    if not artifacts.exists(base, aws_conn_id=aws_conn_id):
        return None
    read = StreamRead(max_records=max_records)
    listed = artifacts.list_uris(base, aws_conn_id=aws_conn_id, kind="dir")
    sources = [uri for uri in listed if _SOURCE.match(uri.rsplit("/", 1)[-1])]
    if len(sources) > MAX_SOURCES:
        read.capped, sources = True, sources[:MAX_SOURCES]
    budget = max(1, max_records // max(1, len(sources)))
    for uri in sources:
        read.sources[uri.rsplit("/", 1)[-1]] = read_source(artifacts.confined(uri, root), root, aws_conn_id,
                                                           budget, read)  # fmt: skip
    return read


def profile_traces(output_uri: str, root: str, aws_conn_id: str | None = None) -> list[str]:
    """The names of the run's profile traces (``<output>/profile/trace-rank<R>.json``), confined like the stream."""
    base = f"{artifacts.confined(output_uri, root)}/{boundary.PROFILE_DIR}"
    if not artifacts.exists(base, aws_conn_id=aws_conn_id):
        return []
    names = [uri.rsplit("/", 1)[-1] for uri in artifacts.list_uris(base, aws_conn_id=aws_conn_id)]
    return sorted(name for name in names if _TRACE.match(name))


def read_source(
    source_uri: str, root: str, aws_conn_id: str | None, budget: int, read: StreamRead
) -> list[dict[str, Any]]:
    """One source's newest ``budget`` valid records, oldest first; what is left out is noted in ``read``."""
    chunks = {uri.rsplit("/", 1)[-1]: uri for uri in artifacts.list_uris(source_uri, aws_conn_id=aws_conn_id)}
    source = source_uri.rsplit("/", 1)[-1]
    newest_first: list[list[dict[str, Any]]] = []
    kept = 0
    for name in reversed(boundary.chunk_order(list(chunks))):
        if kept >= budget:
            read.capped = True
            break
        records = _chunk_records(artifacts.confined(chunks[name], root), f"{source}/{name}", aws_conn_id, read)
        if kept + len(records) > budget:
            records, read.capped = records[len(records) - (budget - kept) :], True
        newest_first.append(records)
        kept += len(records)
    return [r for records in reversed(newest_first) for r in records]


def _chunk_records(uri: str, where: str, aws_conn_id: str | None, read: StreamRead) -> list[dict[str, Any]]:
    """One chunk's plottable records; an unreadable chunk or a bad record is noted and skipped."""
    data = artifacts.read_bytes(uri, missing_ok=True, aws_conn_id=aws_conn_id, max_bytes=MAX_CHUNK_BYTES)
    if data is None:  # removed between the listing and the read
        return []
    if len(data) > MAX_CHUNK_BYTES:
        read.note(f"{where}: larger than {MAX_CHUNK_BYTES} bytes; chunk skipped")
        return []
    try:
        parsed = boundary.parse_chunk(data, where)
    except boundary.StreamFormatError as err:
        read.note(f"{err}; chunk skipped")
        return []
    records = []
    for number, record in enumerate(parsed, 1):
        if record.get(boundary.KEY_KIND) not in FIELD_TYPES:
            continue  # a kind this view does not plot (the format keeps unknown kinds for readers to ignore)
        problem = record_problem(record)
        if problem:
            read.note(f"{where} record {number}: {problem}; record skipped")
        else:
            records.append(_whole(record))
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
    utilization by time. ``sources`` are records that passed ``record_problem``.

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
    series["y_range"] = {"neuroncores": list(PERCENT_RANGE), "host": list(PERCENT_RANGE)}
    return series


def progress_label(progress: dict[str, Any], state: str | None) -> str | None:
    """The page's progress line: ``step 12/1000 (1%)`` while the task runs; once it has ended, the last step it
    logged (a job may stop before ``total_steps``, or log every few steps: "100/110 (91%)" would read as cut
    short). None before the first step record."""
    step, total = progress.get("step"), progress.get("total_steps")
    if step is None:
        return None
    from airflow.utils.state import State

    if state in State.finished:  # the job writes nothing more
        return f"last logged step {step}"
    if not total:
        return f"step {step}"
    return f"step {step}/{total} ({math.floor(100 * step / total + 0.5)}%)"


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
