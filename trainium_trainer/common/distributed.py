"""Data-parallel plumbing for torchrun ranks on each runtime.

- neuron: the ``xla`` process group; gradients are all-reduced on the NeuronCores.
- xla (CPU): PJRT's CPU client has no cross-process collectives, so gradients travel through ``gloo``
  on the host. The model's forward and backward still run as compiled XLA graphs.
- eager: ``gloo``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from trainium_trainer.common.device import Runtime


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    def all_reduce_gradients(self, params: list[torch.nn.Parameter], runtime: Runtime) -> None:
        """Average gradients over all ranks in place.

        Over gloo on torch-xla CPU this is the step's one documented host synchronisation: the forward and
        backward graph runs first (one graph, with the loss and gradients as outputs), then the gradients
        cross the host once each way and the optimizer's update becomes the step's second graph.
        """
        if not self.enabled:
            return
        grads = [p.grad for p in params if p.grad is not None]
        if self.backend == "xla":
            import torch_xla.core.xla_model as xm

            xm.all_reduce(xm.REDUCE_SUM, grads, scale=1.0 / self.world_size)
            return
        # Without this cut each gradient's host copy would trace and run a graph of its own.
        runtime.step()
        host = runtime.to_cpu(grads)  # one device-to-host transfer for all gradients
        flat = torch.cat([g.reshape(-1) for g in host])
        dist.all_reduce(flat)
        flat /= self.world_size
        reduced = flat.to(grads[0].device)  # and one transfer back
        offset = 0
        for grad in grads:
            n = grad.numel()
            grad.copy_(reduced[offset : offset + n].view_as(grad))
            offset += n

    def all_reduce_sum(self, value: torch.Tensor, runtime: Runtime) -> torch.Tensor:
        """Sum of ``value`` over ranks, returned on the host."""
        if not self.enabled:
            return runtime.to_cpu(value)
        if self.backend == "xla":
            import torch_xla.core.xla_model as xm

            reduced = xm.all_reduce(xm.REDUCE_SUM, value)
            assert isinstance(reduced, torch.Tensor)  # one tensor in, one out (a list only for a list)
            runtime.step()
            return reduced.cpu()
        host = runtime.to_cpu(value).clone()
        dist.all_reduce(host)
        return host

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


def init_distributed(runtime: Runtime) -> Distributed:
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Distributed()
    rank = int(os.environ["RANK"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if runtime.name == "neuron":
        import torch_xla.distributed.xla_backend  # noqa: F401  (registers the backend)

        dist.init_process_group("xla", init_method="xla://")
        backend = "xla"
    else:
        dist.init_process_group("gloo")
        backend = "gloo"
    return Distributed(rank=rank, world_size=world_size, local_rank=local_rank, backend=backend)
