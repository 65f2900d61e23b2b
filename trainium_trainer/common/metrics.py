"""A training run's metrics, each logged step recorded once.

``TrainMetrics`` is the one recorder a trainer calls at a logged step: it builds one train record (the
stream's format, ``trainium_trainer.boundary``), appends it to the live stream (``stream/train/``, a new chunk per
flush: nothing is rewritten), logs the progress line from it and keeps it for the summary. At the end,
``finish`` writes ``metrics.json`` once: the trainer's summary plus ``history``, this process's train records;
``mark_done`` then writes ``_SUCCESS`` with the job's hash, by which a rerun of the same job knows it has nothing
to do (``finished_summary``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris
from trainium_trainer.common.progress import DEFAULT_EVERY_S as DEFAULT_PROGRESS_EVERY_S
from trainium_trainer.common.progress import ProgressReporter
from trainium_trainer.common.stream import DEFAULT_EVERY_S, StreamWriter, eval_record, finite, mfu, train_record

log = logging.getLogger("trainer")


class TrainMetrics:
    """What a trainer's main rank calls at each logged step, at the evaluation and at the end.

    Throughput is measured here, between logged steps, from ``items_per_step`` (samples or tokens of all ranks);
    MFU is ``flops_per_item`` x items/s over ``peak_flops`` (the job's, from ``TRAINIUM_PEAK_FLOPS``), null
    where either is unknown. ``enabled=False`` (every rank but the main one) records and writes nothing, so the
    call sites need no rank checks; ``live=False`` (a compile trial) keeps the summary but writes no stream and
    logs no progress.
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
        live: bool = True,
        every_s: float = DEFAULT_EVERY_S,
        progress_every_s: float = DEFAULT_PROGRESS_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.output_uri = output_uri
        self.enabled = enabled
        live = enabled and live
        self.writer = StreamWriter(output_uri, boundary.TRAIN_SOURCE, every_s, clock) if live and output_uri else None
        self.progress = ProgressReporter(start_step, progress_every_s, clock=clock) if live else None
        self.total_steps, self.items_per_step, self.unit = total_steps, items_per_step, unit
        self.flops_per_item, self.peak_flops = flops_per_item, peak_flops
        self.history: list[dict[str, Any]] = []
        self.clock = clock
        self.mark = (clock(), start_step)

    def mfu(self, items_per_s: float | None) -> float | None:
        """MFU at ``items_per_s`` (samples or tokens per second of the whole job)."""
        flops = items_per_s * self.flops_per_item if items_per_s is not None and self.flops_per_item else None
        return mfu(flops, self.peak_flops)

    def train(self, *, step: int, epoch: int, loss: float, lr: float, xla_graphs: int | None = None) -> None:
        """Record logged step ``step``: one train record, streamed, logged and kept for the summary."""
        if not self.enabled:
            return
        now = self.clock()
        then, from_step = self.mark
        self.mark = (now, step)
        rate = (step - from_step) * self.items_per_step / (now - then) if now > then and step > from_step else None
        record = train_record(
            step=step,
            total_steps=self.total_steps,
            epoch=epoch,
            loss=loss,
            lr=lr,
            samples_per_s=round(rate, 2) if rate is not None and self.unit == "samples" else None,
            tokens_per_s=round(rate, 1) if rate is not None and self.unit == "tokens" else None,
            mfu=self.mfu(rate),
            xla_graphs=xla_graphs,
        )
        record = finite(boundary.stamp(record, time.time()))  # as the stream has it
        if self.writer is not None:
            self.writer.append(record)
        self.history.append(record)
        if self.progress is not None:
            self.progress.update(record)

    def eval(self, *, step: int, loss: float | None = None, accuracy: float | None = None) -> None:
        if self.writer is not None:
            self.writer.append(eval_record(step=step, loss=loss, accuracy=accuracy))

    def close(self) -> None:
        """Flush the stream (the summary may come later: the model export runs in between)."""
        if self.writer is not None:
            self.writer.close()

    def finish(self, summary: Mapping[str, Any]) -> dict[str, Any]:
        """Write ``metrics.json`` (``summary`` and ``history``) under the output URI; returns what it wrote."""
        self.close()
        result = {**summary, "history": self.history}
        if self.enabled and self.output_uri:
            uris.write_json(uris.join(self.output_uri, boundary.METRICS_FILE), result)
        return result


def mark_done(output_uri: str) -> None:
    """Write ``_SUCCESS``, last, with this job's hash (``TRAINIUM_JOB_HASH``): the output is complete."""
    uris.write_json(uris.join(output_uri, boundary.SUCCESS_MARKER), {"job_hash": os.environ.get(boundary.ENV_JOB_HASH)})


def already_done(output_uri: str | None) -> bool:
    """This exact job (same ``TRAINIUM_JOB_HASH``) already wrote a complete output: a rerun changes nothing."""
    job_hash = os.environ.get(boundary.ENV_JOB_HASH)
    marker = uris.join(output_uri, boundary.SUCCESS_MARKER) if output_uri else None
    if not job_hash or not marker or not uris.exists(marker):
        return False
    recorded: str | None = uris.read_json(marker).get("job_hash")
    return recorded == job_hash


def finished_summary(output_uri: str | None) -> dict[str, Any] | None:
    """The ``metrics.json`` this exact job already wrote (:func:`already_done`), which a rerun returns as its own;
    None when the job has yet to finish."""
    if not output_uri or not already_done(output_uri):
        return None
    log.info("output %s is already complete for this job; nothing to do", output_uri)
    done: dict[str, Any] = uris.read_json(uris.join(output_uri, boundary.METRICS_FILE))
    return done
