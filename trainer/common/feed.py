"""Batches prepared ahead of the step, so the step itself only computes.

- Host side: one gather per epoch puts this rank's samples, already shuffled, into contiguous tensors; each
  step's batch is a view of them (no per-step indexing, no copy).
- XLA (Neuron, torch-xla CPU): torch-xla's ``ParallelLoader`` moves the batches to the device in background
  threads, as the Neuron training samples do, and cuts the step's graph (``torch_xla.sync``) when the next
  batch is taken. The training loop therefore calls no sync of its own.
- Eager: the views are the batches.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import torch

from trainer.common.device import Runtime

#: Host batches queued ahead of the transfer thread, and device batches queued ahead of the step.
LOADER_PREFETCH = 32
DEVICE_PREFETCH = 16


def gather_batches(tensors: Sequence[torch.Tensor], order: np.ndarray) -> list[tuple[torch.Tensor, ...]]:
    """Per-step batches for ``order`` (shape ``(steps, batch)``, sample indices), as contiguous views.

    Each tensor is gathered once (``index_select`` into one new tensor), then split along the step axis.
    """
    steps, batch = order.shape
    flat = torch.from_numpy(np.ascontiguousarray(order.reshape(-1), dtype=np.int64))
    gathered = [t.index_select(0, flat).view(steps, batch, *t.shape[1:]) for t in tensors]
    return list(zip(*(g.unbind(0) for g in gathered), strict=True))


@contextmanager
def device_feed(batches: Sequence[object], runtime: Runtime) -> Iterator[Iterator[object]]:
    """Iterate ``batches`` on the runtime's device; on XLA each ``next()`` first ends the previous step's graph.

    Leaving the block early (``--max-steps``, an error) stops the transfer threads; the caller syncs once
    after the loop (the loader only syncs itself when it runs out of batches).
    """
    if not runtime.is_xla:
        yield iter(batches)
        return
    from torch_xla.distributed.parallel_loader import ParallelLoader

    loader = ParallelLoader(
        batches, [runtime.device], loader_prefetch_size=LOADER_PREFETCH, device_prefetch_size=DEVICE_PREFETCH
    )
    try:
        yield loader.per_device_loader(runtime.device)
    finally:
        loader.close()
