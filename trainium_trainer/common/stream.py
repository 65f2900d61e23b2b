"""The live metrics stream: numbered JSON-lines chunks under ``<output_uri>/stream/<source>/``.

S3 has no append, so every flush writes a new chunk ``000000.jsonl``, ``000001.jsonl``, ... (file:// does the
same, so both behave alike). A writer that starts, or restarts after a kill or a resume, continues after the
highest chunk already there: the history of earlier attempts is never overwritten. The layout, the record
format and the reader rule belong to ``trainium_trainer.boundary`` (the UI reads through the same parser).
``metrics.json`` stays the final summary; this stream is what the UI and the provider read while a run goes.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError
from trainium_trainer.common.progress import DEFAULT_EVERY_S as DEFAULT_PROGRESS_EVERY_S

log = logging.getLogger("trainer")

DEFAULT_EVERY_S = 10.0
monitor_source = boundary.monitor_source


def source_uri(output_uri: str, source: str) -> str:
    return uris.join(output_uri, boundary.STREAM_DIR, source)


def _names(uri: str) -> list[str]:
    """Names directly under ``uri``, read past fsspec's listing cache (another process may have written)."""
    fs, path = uris.filesystem(uri)
    fs.invalidate_cache(path)
    if not fs.exists(path):
        return []
    return [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False)]


def next_seq(uri: str) -> int:
    """The number after the highest chunk in the source folder ``uri`` (0 for a new stream)."""
    seqs = [seq for seq in map(boundary.chunk_seq, _names(uri)) if seq is not None]
    return max(seqs) + 1 if seqs else 0


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
        self.buffer.append(boundary.stamp(record, time.time()))
        if self.clock() - self.last_flush >= self.every_s:
            self.flush()

    def flush(self) -> None:
        self.last_flush = self.clock()
        if not self.buffer:
            return
        data = "".join(json.dumps(finite(r), sort_keys=True) + "\n" for r in self.buffer).encode()
        target = uris.join(self.uri, boundary.chunk_name(self.seq))
        try:
            uris.write_bytes(target, data)
        except Exception as err:  # noqa: BLE001 - the stream is an observer; training goes on
            log.warning("metrics stream: could not write %s (%s); retrying at the next flush", target, err)
            return
        self.seq += 1
        self.buffer.clear()

    def close(self) -> None:
        self.flush()


def finite(record: Mapping[str, Any]) -> dict[str, Any]:
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
    return boundary.record(boundary.KIND_TRAIN, step=step, total_steps=total_steps, epoch=epoch, loss=loss,
                           samples_per_s=samples_per_s, tokens_per_s=tokens_per_s, mfu=mfu, lr=lr,
                           xla_graphs=xla_graphs)  # fmt: skip


def eval_record(*, step: int, loss: float | None = None, accuracy: float | None = None) -> dict[str, Any]:
    return boundary.record(boundary.KIND_EVAL, step=step, loss=loss, accuracy=accuracy)


def job_peak_flops(world_size: int, env: Mapping[str, str] = os.environ) -> float | None:
    """The job's dense peak FLOP/s for MFU: ``TRAINIUM_PEAK_FLOPS`` (per NeuronCore, i.e. per rank) x ranks.

    The provider sets it only where the job runs on Trainium hardware; without it there is no meaningful
    peak (a CPU), so MFU is None.
    """
    value = env.get(boundary.ENV_PEAK_FLOPS, "").strip()
    if not value:
        return None
    try:
        per_rank = float(value)
    except ValueError:
        per_rank = math.nan
    if not math.isfinite(per_rank) or per_rank <= 0:
        raise BadInputError(f"{boundary.ENV_PEAK_FLOPS}={value!r} is not a positive number of FLOP/s")
    return per_rank * world_size


def mfu(flops_per_s: float | None, peak_flops: float | None) -> float | None:
    """Achieved over peak FLOP/s; None where either is unknown."""
    return round(flops_per_s / peak_flops, 8) if flops_per_s is not None and peak_flops else None


def list_sources(output_uri: str) -> list[str]:
    return sorted(_names(uris.join(output_uri, boundary.STREAM_DIR)))


def chunks(output_uri: str, source: str) -> list[str]:
    """The URIs of a source's chunks, oldest first."""
    uri = source_uri(output_uri, source)
    return [uris.join(uri, name) for name in boundary.chunk_order(_names(uri))]


def read_records(output_uri: str, source: str, kinds: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every record of one source in write order, by the reader rule of ``trainium_trainer.boundary.parse_chunk``;
    ``kinds`` keeps only records of those kinds."""
    wanted = set(kinds) if kinds is not None else None
    return [
        record
        for chunk in chunks(output_uri, source)
        for record in boundary.parse_chunk(uris.read_bytes(chunk), chunk)
        if wanted is None or record.get(boundary.KEY_KIND) in wanted
    ]


def add_stream_args(parser: Any) -> None:
    """``--stream-every-s`` and ``--progress-every-s``, defaulting to their ``TRAINIUM_*`` variables."""
    env = os.environ.get
    parser.add_argument("--stream-every-s", type=float,
                        default=float(env(boundary.ENV_STREAM_EVERY_S, DEFAULT_EVERY_S)),
                        help="seconds between chunks of the live metrics stream")  # fmt: skip
    parser.add_argument("--progress-every-s", type=float,
                        default=float(env(boundary.ENV_PROGRESS_EVERY_S, DEFAULT_PROGRESS_EVERY_S)),
                        help="seconds between progress lines in the log")  # fmt: skip
