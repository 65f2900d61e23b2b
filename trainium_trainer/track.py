"""Curves for any training script: ``track.log`` puts a script's own steps into the run's live metrics stream.

The trainers of this package record their steps through ``trainium_trainer.common.metrics``. A script of your own
(run by ``TrainiumJobOperator(command=[...])`` or ``@task.trainium``) calls this module and gets the same two things:
train and eval records in ``<output_uri>/stream/train/`` (what the Trainium view plots) and the progress line in
the task log::

    import os
    from trainium_trainer import track

    world = int(os.environ.get("WORLD_SIZE", "1"))
    for step, batch in enumerate(loader, start=1):
        loss = train_step(batch)
        track.log(step=step, loss=loss.item(), tokens=batch["input_ids"].numel() * world, total_steps=max_steps)
    track.log_eval(step=max_steps, loss=val_loss)

Why it can stay in a script that also runs elsewhere: it writes only where the launcher set
``TRAINIUM_OUTPUT_URI`` and only on global rank 0 (torchrun's ``RANK``; absent means 0), so on a laptop and on
every other rank each call does nothing. The stream is an observer: a failed write is a warning, never an
exception. It loads nothing but the standard library until it has a record to write, and then only the
trainer's own writer (``trainium_trainer.common.stream``, fsspec; s3fs for ``s3://``): no torch. Records are written
every ``TRAINIUM_STREAM_EVERY_S`` seconds (default 10), by ``close()`` and at interpreter exit.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from trainium_trainer import boundary
from trainium_trainer.common import progress

if TYPE_CHECKING:
    from trainium_trainer.common.stream import StreamWriter

logger = logging.getLogger("trainer")

#: torchrun's global rank of this process.
RANK_ENV = "RANK"


def _rank(env: Mapping[str, str]) -> int | None:
    """This process's global rank; None when ``RANK`` is not a number (then nothing is written: it may not be 0)."""
    value = env.get(RANK_ENV, "").strip() or "0"
    try:
        return int(value)
    except ValueError:
        return None


def _seconds(env: Mapping[str, str], name: str) -> float | None:
    """A non-negative number of seconds from ``env``; None when unset or not one (then the default: a typo must
    not stop training, the stream is an observer)."""
    value = env.get(name, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if math.isfinite(seconds) and seconds >= 0:
        return seconds
    logger.warning("track: %s=%r is not a number of seconds; using the default", name, value)
    return None


def _number(value: Any) -> float | None:
    """A metric as a plain float (a 0-d tensor or numpy scalar too); None stays None."""
    return None if value is None else float(value)


def _print_progress(line: str) -> None:
    print(f"progress {line}", flush=True)


class Tracker:
    """One process's recorder: builds each record, measures throughput between calls, writes and reports it.

    ``output_uri=None`` (or ``enabled=False``) makes every method a no-op. Throughput is the ``tokens`` and
    ``samples`` given with a call over the time since the previous call, so the first call only starts the clock.
    """

    def __init__(
        self,
        output_uri: str | None,
        *,
        enabled: bool = True,
        every_s: float | None = None,
        progress_every_s: float = progress.DEFAULT_EVERY_S,
        env: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.monotonic,
        emit: Callable[[str], None] = _print_progress,
    ) -> None:
        self.output_uri = output_uri if enabled and output_uri else None
        self.every_s = every_s
        self.progress_every_s = progress_every_s
        self.env = env
        self.clock = clock
        self.emit = emit
        self.total_steps: int | None = None
        self._writer: StreamWriter | None = None
        self._writer_failed = False
        self._progress: progress.ProgressReporter | None = None
        self._mark: float | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Tracker:
        """The tracker the launcher's environment asks for: rank 0 with an output URI writes, any other none."""
        progress_every_s = _seconds(env, boundary.ENV_PROGRESS_EVERY_S)
        return cls(
            env.get(boundary.ENV_OUTPUT_URI, "").strip() or None,
            enabled=_rank(env) == 0,
            every_s=_seconds(env, boundary.ENV_STREAM_EVERY_S),
            progress_every_s=progress.DEFAULT_EVERY_S if progress_every_s is None else progress_every_s,
            env=env,
        )

    @property
    def active(self) -> bool:
        return self.output_uri is not None

    def _stream(self) -> StreamWriter | None:
        """The stream writer, made at the first record (that is when fsspec is first imported); None if it
        cannot be made, after one warning: the script trains on without curves."""
        if self._writer is None and not self._writer_failed and self.output_uri is not None:
            try:
                from trainium_trainer.common import stream

                every_s = stream.DEFAULT_EVERY_S if self.every_s is None else self.every_s
                self._writer = stream.StreamWriter(self.output_uri, boundary.TRAIN_SOURCE, every_s, self.clock)
            except Exception as err:  # noqa: BLE001 - no fsspec, no credentials: the curves are lost, not the run
                self._writer_failed = True
                logger.warning("track: no metrics stream under %s (%s); training goes on", self.output_uri, err)
        return self._writer

    def _rate(self, count: float | None, elapsed: float | None, digits: int) -> float | None:
        return round(count / elapsed, digits) if count is not None and elapsed else None

    def log(
        self,
        *,
        step: int,
        loss: float,
        tokens: float | None = None,
        samples: float | None = None,
        total_steps: int | None = None,
        lr: float | None = None,
        epoch: float | None = None,
    ) -> dict[str, Any] | None:
        """Record step ``step``; returns the train record (None when this process writes nothing).

        ``tokens`` and ``samples``: what the whole job processed since the previous call (on a data-parallel
        run, this rank's count times the data-parallel ranks). ``total_steps`` once is enough: it is kept.
        """
        if not self.active:
            return None
        now = self.clock()
        elapsed = now - self._mark if self._mark is not None and now > self._mark else None
        self._mark = now
        if total_steps is not None:
            self.total_steps = int(total_steps)
        record = boundary.record(
            boundary.KIND_TRAIN,
            step=int(step),
            total_steps=self.total_steps,
            epoch=epoch if epoch is None or isinstance(epoch, int) else float(epoch),
            loss=_number(loss),
            lr=_number(lr),
            samples_per_s=self._rate(_number(samples), elapsed, 2),
            tokens_per_s=self._rate(_number(tokens), elapsed, 1),
        )
        writer = self._stream()
        if writer is not None:
            writer.append(record)
        self._report(record)
        return record

    def _report(self, record: dict[str, Any]) -> None:
        """The progress line: it shows step N of the total and an ETA, so it starts once ``total_steps`` is known."""
        if record["total_steps"] is None:
            return
        if self._progress is None:
            self._progress = progress.ProgressReporter(
                record["step"], self.progress_every_s, env=self.env, clock=self.clock, emit=self.emit
            )
        self._progress.update(record)

    def log_eval(self, *, step: int, loss: float | None = None, accuracy: float | None = None) -> None:
        """Record an evaluation at ``step`` (the view plots its loss and accuracy by step)."""
        if not self.active:
            return
        writer = self._stream()
        if writer is not None:
            record = boundary.record(boundary.KIND_EVAL, step=int(step), loss=_number(loss), accuracy=_number(accuracy))
            writer.append(record)

    def close(self) -> None:
        """Write what is buffered now (``log`` may still be called after: the next flush writes a new chunk)."""
        if self._writer is not None:
            self._writer.close()


_current: Tracker | None = None


def current() -> Tracker:
    """This process's tracker, made from the environment at the first call and closed at interpreter exit."""
    global _current
    if _current is None:
        _current = Tracker.from_env()
        if _current.active:
            atexit.register(_current.close)
    return _current


def log(
    *,
    step: int,
    loss: float,
    tokens: float | None = None,
    samples: float | None = None,
    total_steps: int | None = None,
    lr: float | None = None,
    epoch: float | None = None,
) -> None:
    """Record a training step: see ``Tracker.log`` (``tokens``/``samples`` are the job's since the last call)."""
    current().log(step=step, loss=loss, tokens=tokens, samples=samples, total_steps=total_steps, lr=lr, epoch=epoch)


def log_eval(*, step: int, loss: float | None = None, accuracy: float | None = None) -> None:
    """Record an evaluation at ``step``."""
    current().log_eval(step=step, loss=loss, accuracy=accuracy)


def close() -> None:
    """Write the buffered records now (it also happens at interpreter exit)."""
    if _current is not None:
        _current.close()
