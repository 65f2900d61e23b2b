"""Batches prepared ahead of the step, so the step itself only computes.

- Host side: one gather per epoch puts this rank's samples, already shuffled, into contiguous tensors; each
  step's batch is a view of them (no per-step indexing, no copy). ``EpochBatches`` gathers epoch e+1 in a
  background thread while epoch e trains, into the other of two buffer sets (``gather_buffers``): memory
  touched once at setup, instead of fresh pages every epoch, which measured at about three times the cost of
  the copy itself; and the shuffle costs the training loop nothing after the first epoch.
- XLA: taking the next batch cuts the previous step's graph (``torch_xla.sync``), so the training loop calls
  no sync of its own. How the batches reach the device depends on where the device is:

  - ``background`` (default on Neuron): torch-xla's ``ParallelLoader`` moves them in background threads, as
    the Neuron training samples do; the copies to the NeuronCores' memory overlap the device's compute.
  - ``sync`` (default on torch-xla CPU): chunks of ``SYNC_CHUNK`` batches are moved in one call on the
    training thread, just before they are needed. The "device" is the host's own cores, so there is nothing
    to overlap: the loader's two threads only compete with the step for the same cores and the GIL, which
    measured slower than the bare loop on a two-core host (see ``benchmarks/trainer_overhead.py``).

  ``TRAINIUM_DEVICE_FEED=background|sync`` picks one explicitly (to compare them).
- Eager: the views are the batches.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt
import torch

from trainium_trainer import boundary
from trainium_trainer.common.device import Runtime

#: Host batches queued ahead of the transfer thread, and device batches queued ahead of the step.
LOADER_PREFETCH = 32
DEVICE_PREFETCH = 16
#: Batches moved per transfer call by the synchronous feed.
SYNC_CHUNK = 32
FEEDS = ("background", "sync")
_Batch = TypeVar("_Batch")


def gather_buffers(tensors: Sequence[torch.Tensor], rows: int) -> list[torch.Tensor]:
    """Destinations for ``gather_batches(..., out=)`` holding ``rows`` samples of each tensor, already touched."""
    return [torch.empty((rows, *t.shape[1:]), dtype=t.dtype).fill_(0) for t in tensors]


def gather_batches(
    tensors: Sequence[torch.Tensor], order: npt.NDArray[Any], out: Sequence[torch.Tensor] | None = None
) -> list[tuple[torch.Tensor, ...]]:
    """Per-step batches for ``order`` (shape ``(steps, batch)``, sample indices), as contiguous views.

    Each tensor is gathered once (``index_select`` into one tensor), then split along the step axis. With
    ``out`` (from ``gather_buffers``) the gather reuses those buffers: the batches stay valid until the next
    gather into them, so the feed over them must have ended and its graphs run (``Runtime.wait``) first.
    """
    steps, batch = order.shape
    flat = torch.from_numpy(np.ascontiguousarray(order.reshape(-1), dtype=np.int64))
    if out is None:
        gathered = [t.index_select(0, flat) for t in tensors]
    else:
        if len(out) != len(tensors) or any(len(o) < len(flat) for o in out):
            raise ValueError(f"gather buffers hold fewer than the {len(flat)} samples of this order")
        gathered = [torch.index_select(t, 0, flat, out=o[: len(flat)]) for t, o in zip(tensors, out, strict=True)]
    views = [g.view(steps, batch, *t.shape[1:]) for g, t in zip(gathered, tensors, strict=True)]
    return list(zip(*(v.unbind(0) for v in views), strict=True))


class EpochBatches:
    """Each epoch's batches (``gather_batches``), the next epoch's gathered in a background thread meanwhile.

    The first epoch is gathered by the first ``next()``, on the caller's thread, as set-up. Epoch e+1 is then
    gathered while epoch e trains, into the other of two buffer sets; the set epoch e-1 used is refilled only
    once the caller asks for epoch e, so the caller must be done with an epoch's batches (on XLA: its graphs
    have run, ``Runtime.wait``) before asking for the next. ``waited_s`` is the time the caller spent blocked on
    a background gather: training time, which a throughput figure must count.
    """

    def __init__(
        self, tensors: Sequence[torch.Tensor], order_of: Callable[[int], npt.NDArray[Any]], epochs: Sequence[int]
    ) -> None:
        self._tensors = tensors
        self._order_of = order_of
        self._epochs = list(epochs)
        self._buffers: list[list[torch.Tensor] | None] = [None, None]
        self._pool: ThreadPoolExecutor | None = None
        self.waited_s = 0.0

    def _gather(self, slot: int, epoch: int) -> list[tuple[torch.Tensor, ...]]:
        order = self._order_of(epoch)
        buffers = self._buffers[slot]
        if buffers is None or len(buffers[0]) < order.size:
            buffers = self._buffers[slot] = gather_buffers(self._tensors, order.size)
        return gather_batches(self._tensors, order, out=buffers)

    def __iter__(self) -> Iterator[tuple[int, list[tuple[torch.Tensor, ...]]]]:
        if not self._epochs:
            return
        current = self._gather(0, self._epochs[0])
        for i, epoch in enumerate(self._epochs):
            ahead: Future[list[tuple[torch.Tensor, ...]]] | None = None
            if i + 1 < len(self._epochs):
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="epoch-gather")
                ahead = self._pool.submit(self._gather, (i + 1) % 2, self._epochs[i + 1])
            yield epoch, current
            if ahead is not None:
                started = time.perf_counter()
                current = ahead.result()
                self.waited_s += time.perf_counter() - started

    def close(self) -> None:
        """Stop the background gather (leaving early: ``--max-steps``, an error)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> EpochBatches:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def feed_kind(runtime: Runtime) -> str:
    """How batches reach an XLA device: ``background`` on Neuron, ``sync`` on torch-xla CPU (module docstring)."""
    forced = os.environ.get(boundary.ENV_DEVICE_FEED, "").strip().lower()
    if forced:
        if forced not in FEEDS:
            raise ValueError(f"{boundary.ENV_DEVICE_FEED}={forced!r}; allowed: {', '.join(FEEDS)}")
        return forced
    return "background" if runtime.name == "neuron" else "sync"


@contextmanager
def device_feed(batches: Sequence[_Batch], runtime: Runtime) -> Iterator[Iterator[_Batch]]:
    """Iterate ``batches`` on the runtime's device; on XLA each ``next()`` first ends the previous step's graph.

    When the batches run out the feed cuts the last step's graph too. Leaving the block early
    (``--max-steps``, an error) stops the background threads; the caller syncs once after the loop.
    """
    if not runtime.is_xla:
        yield iter(batches)
        return
    if feed_kind(runtime) == "sync":
        yield _sync_feed(batches, runtime.device)
        return
    from torch_xla.distributed.parallel_loader import ParallelLoader

    loader = ParallelLoader(
        batches, [runtime.device], loader_prefetch_size=LOADER_PREFETCH, device_prefetch_size=DEVICE_PREFETCH
    )
    try:
        yield loader.per_device_loader(runtime.device)
    finally:
        loader.close()


def _sync_feed(batches: Sequence[_Batch], device: torch.device) -> Iterator[_Batch]:
    """The loader's contract without its threads: one transfer call per chunk, a graph cut before each batch."""
    import torch_xla
    import torch_xla.core.xla_model as xm

    for start in range(0, len(batches), SYNC_CHUNK):
        # the chunk's batches moved, a list as given (torch_xla annotates it as returning a ToXlaTensorArena)
        moved = cast(list[_Batch], xm.send_cpu_data_to_device(list(batches[start : start + SYNC_CHUNK]), device))
        for batch in moved:
            torch_xla.sync()  # as the loader: what was traced before this batch (the previous step) runs now
            yield batch
    torch_xla.sync()
