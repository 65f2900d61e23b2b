"""The live metrics stream: numbered JSON-lines chunks under ``<output_uri>/stream/<source>/``.

S3 has no append, so every flush writes a new chunk ``000000.jsonl``, ``000001.jsonl``, ... (file:// does the
same, so both behave alike). A writer that starts, or restarts after a kill or a resume, continues after the
highest chunk already there: the history of earlier attempts is never overwritten. Every record carries
``"v": 1`` and ``time`` (unix seconds); readers ignore unknown keys and kinds. ``metrics.json`` stays the final
summary; this stream is what the UI and the provider read while a run is going.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainer.common import uri as uris

log = logging.getLogger("trainer")

VERSION = 1
STREAM_DIR = "stream"
TRAIN_SOURCE = "train"
DEFAULT_EVERY_S = 10.0
_CHUNK = re.compile(r"^(\d{6})\.jsonl$")
#: Dense BF16 peak of one Trn1 NeuronCore: 190 TFLOPS per chip / 2 NeuronCores (docs/fidelity.md).
TRN1_PEAK_FLOPS_PER_CORE = 95e12


def source_uri(output_uri: str, source: str) -> str:
    return uris.join(output_uri, STREAM_DIR, source)


def monitor_source(node: int) -> str:
    return f"monitor-node{node}"


def chunk_name(seq: int) -> str:
    return f"{seq:06d}.jsonl"


def _fresh_listing(uri: str) -> list[str]:
    """Chunk names under ``uri``, read past fsspec's listing cache (another process may have written)."""
    fs, path = uris.filesystem(uri)
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return []
    return sorted(name for name in (p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
                  if _CHUNK.match(name))  # fmt: skip


def next_seq(uri: str) -> int:
    """The number after the highest chunk in the source folder ``uri`` (0 for a new stream)."""
    names = _fresh_listing(uri)
    return int(_CHUNK.match(names[-1]).group(1)) + 1 if names else 0  # type: ignore[union-attr]


class StreamWriter:
    """Buffers records and writes them as one new chunk every ``every_s`` seconds (and on ``close``).

    A failed write never stops training: it is logged as a warning and the records wait for the next flush.
    """

    def __init__(
        self,
        output_uri: str,
        source: str,
        every_s: float = DEFAULT_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.uri = source_uri(output_uri, source)
        self.every_s = every_s
        self.clock = clock
        self.seq = next_seq(self.uri)
        self.buffer: list[dict[str, Any]] = []
        self.last_flush = clock()

    def append(self, record: Mapping[str, Any]) -> None:
        self.buffer.append({"v": VERSION, "time": time.time(), **record})
        if self.clock() - self.last_flush >= self.every_s:
            self.flush()

    def flush(self) -> None:
        self.last_flush = self.clock()
        if not self.buffer:
            return
        data = "".join(json.dumps(_finite(r), sort_keys=True) + "\n" for r in self.buffer).encode()
        target = uris.join(self.uri, chunk_name(self.seq))
        try:
            uris.write_bytes(target, data)
        except Exception as err:  # noqa: BLE001 - the stream is an observer; training goes on
            log.warning("metrics stream: could not write %s (%s); retrying at the next flush", target, err)
            return
        self.seq += 1
        self.buffer.clear()

    def close(self) -> None:
        self.flush()


def _finite(record: Mapping[str, Any]) -> dict[str, Any]:
    """JSON has no NaN or infinity: such values become null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}


def train_record(
    *,
    step: int,
    total_steps: int,
    epoch: int,
    loss: float,
    lr: float,
    samples_per_s: float | None = None,
    tokens_per_s: float | None = None,
    mfu: float | None = None,
    xla_graphs: int | None = None,
) -> dict[str, Any]:
    return {
        "kind": "train",
        "step": step,
        "total_steps": total_steps,
        "epoch": epoch,
        "loss": loss,
        "samples_per_s": samples_per_s,
        "tokens_per_s": tokens_per_s,
        "mfu": mfu,
        "lr": lr,
        "xla_graphs": xla_graphs,
    }


def eval_record(*, step: int, loss: float | None = None, accuracy: float | None = None) -> dict[str, Any]:
    return {"kind": "eval", "step": step, "loss": loss, "accuracy": accuracy}


def job_peak_flops(runtime_name: str, world_size: int, env: Mapping[str, str] = os.environ) -> float | None:
    """The job's dense peak FLOP/s for MFU: ``TRAINIUM_PEAK_FLOPS`` (per NeuronCore, i.e. per rank) x ranks.

    Without it, Neuron runs use the Trn1 figure and other runtimes (CPU) have no meaningful peak: None.
    """
    value = env.get("TRAINIUM_PEAK_FLOPS", "").strip()
    if value:
        return float(value) * world_size
    if runtime_name == "neuron":
        return TRN1_PEAK_FLOPS_PER_CORE * world_size
    return None


def mfu(flops_per_s: float, peak_flops: float | None) -> float | None:
    return round(flops_per_s / peak_flops, 8) if peak_flops else None


def list_sources(output_uri: str) -> list[str]:
    fs, path = uris.filesystem(uris.join(output_uri, STREAM_DIR))
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return []
    return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))


def chunks(output_uri: str, source: str) -> list[str]:
    """The URIs of a source's chunks, oldest first."""
    uri = source_uri(output_uri, source)
    return [uris.join(uri, name) for name in _fresh_listing(uri)]


def read_records(output_uri: str, source: str, kinds: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every record of one source in write order; records of another version or kind are skipped."""
    wanted = set(kinds) if kinds is not None else None
    records = []
    for chunk in chunks(output_uri, source):
        for line in uris.read_bytes(chunk).decode().splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            if record.get("v") != VERSION or (wanted is not None and record.get("kind") not in wanted):
                continue
            records.append(record)
    return records


def add_stream_args(parser: Any) -> None:
    """``--stream-every-s`` and ``--progress-every-s``, defaulting to their ``TRAINIUM_*`` variables."""
    env = os.environ.get
    parser.add_argument("--stream-every-s", type=float, default=float(env("TRAINIUM_STREAM_EVERY_S", DEFAULT_EVERY_S)),
                        help="seconds between chunks of the live metrics stream")  # fmt: skip
    parser.add_argument("--progress-every-s", type=float, default=float(env("TRAINIUM_PROGRESS_EVERY_S", "30")),
                        help="seconds between progress lines in the log")  # fmt: skip


class TrainStream:
    """What a trainer's main rank calls at each logged step: a train record in the stream and the progress line.

    Throughput is measured here, between logged steps, from ``items_per_step`` (samples or tokens of all ranks);
    MFU is ``flops_per_item`` x items/s over the job's peak, or null where either is unknown. Other ranks get
    a disabled instance, so the call sites need no rank checks.
    """

    def __init__(
        self,
        output_uri: str | None,
        *,
        enabled: bool,
        total_steps: int,
        start_step: int,
        items_per_step: int,
        unit: str,
        flops_per_item: float | None = None,
        peak_flops: float | None = None,
        every_s: float = DEFAULT_EVERY_S,
        progress_every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from trainer.common.progress import ProgressReporter

        self.enabled = enabled
        self.writer = StreamWriter(output_uri, TRAIN_SOURCE, every_s, clock) if enabled and output_uri else None
        self.progress = ProgressReporter(start_step, progress_every_s, clock=clock) if enabled else None
        self.total_steps, self.items_per_step, self.unit = total_steps, items_per_step, unit
        self.flops_per_item, self.peak_flops = flops_per_item, peak_flops
        self.clock = clock
        self.mark = (clock(), start_step)

    def train(self, *, step: int, epoch: int, loss: float, lr: float, xla_graphs: int | None = None) -> None:
        if not self.enabled:
            return
        now = self.clock()
        then, from_step = self.mark
        self.mark = (now, step)
        rate = (step - from_step) * self.items_per_step / (now - then) if now > then and step > from_step else None
        flops = rate * self.flops_per_item if rate is not None and self.flops_per_item else None
        record = train_record(
            step=step,
            total_steps=self.total_steps,
            epoch=epoch,
            loss=loss,
            lr=lr,
            samples_per_s=round(rate, 2) if rate is not None and self.unit == "samples" else None,
            tokens_per_s=round(rate, 1) if rate is not None and self.unit == "tokens" else None,
            mfu=mfu(flops, self.peak_flops) if flops is not None else None,
            xla_graphs=xla_graphs,
        )
        if self.writer is not None:
            self.writer.append(record)
        if self.progress is not None:
            self.progress.update(record)

    def eval(self, *, step: int, loss: float | None = None, accuracy: float | None = None) -> None:
        if self.writer is not None:
            self.writer.append(eval_record(step=step, loss=loss, accuracy=accuracy))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
