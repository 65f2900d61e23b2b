"""Cluster smoke test: every rank all-reduces a tensor; the job fails unless the sums are exact.

Each rank contributes ones (the sum must equal the world size) and its rank + 1 (the sum must equal
W(W+1)/2, so a rank that was counted twice or missed is caught too), then times a few larger all-reduces
to report bus bandwidth. On Neuron the reduction runs on the NeuronCores through the ``xla`` process
group (and EFA between nodes). torch-xla's PJRT CPU client has no cross-process collectives, so on the
CPU the same reduction goes through ``gloo`` on the host (see trainium_trainer.common.distributed).

On the native stack (``TRAINIUM_STACK=native``) the same checks run through plain ``torch.distributed`` on the
native device: the ``neuron`` process group on Trainium, ``gloo`` on a CPU (``trainium_trainer.native``).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any, Protocol

import torch

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit
from trainium_trainer.common import uri as uris
from trainium_trainer.common.device import Runtime, init_runtime
from trainium_trainer.common.distributed import init_distributed
from trainium_trainer.common.errors import configure_logging
from trainium_trainer.common.stack import selected_stack

log = logging.getLogger("trainer")
EXIT_MISMATCH = boundary.EXIT_ALLREDUCE_MISMATCH


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--elements", type=int, default=1024, help="length of the checked tensor")
    p.add_argument("--bandwidth-mb", type=float, default=4.0, help="size of the timed all-reduce (0: skip)")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--output-uri", default=os.environ.get(boundary.ENV_OUTPUT_URI))
    return p.parse_args(argv)


class _Group(Protocol):
    """What ``main`` uses of a process group: the XLA path's ``Distributed`` or the native ``_NativeGroup``."""

    @property
    def rank(self) -> int: ...

    @property
    def world_size(self) -> int: ...

    @property
    def backend(self) -> str | None: ...

    @property
    def is_main(self) -> bool: ...

    # runtime: the XLA path's Runtime (where the reduction runs); the native group ignores it
    def all_reduce_sum(self, value: torch.Tensor, runtime: Any, /) -> torch.Tensor: ...

    def barrier(self) -> None: ...

    def close(self) -> None: ...


class _NativeGroup:
    """The native stack's process group in the shape the checks below use (the XLA path's ``Distributed``)."""

    def __init__(self) -> None:
        import torch.distributed as torch_dist

        from trainium_trainer.native.device import init_device
        from trainium_trainer.native.parallel import init_process_group

        self._dist = torch_dist
        self.device = init_device()
        layout = init_process_group(self.device)
        self.rank, self.world_size, self.is_main = layout.rank, layout.world_size, layout.is_main
        self.backend, self.name = self.device.backend, f"native-{self.device.type}"

    def all_reduce_sum(self, tensor: torch.Tensor, _runtime: object = None) -> torch.Tensor:
        self._dist.all_reduce(tensor)
        return tensor.cpu()

    def barrier(self) -> None:
        self._dist.barrier()

    def close(self) -> None:
        self._dist.destroy_process_group()


def _init_group() -> tuple[_Group, Runtime | _NativeGroup, torch.device]:
    """The process group, the runtime it reduces on (natively the group itself) and the checked tensors' device."""
    if selected_stack() == boundary.STACK_NATIVE:
        native = _NativeGroup()
        return native, native, native.device.device
    runtime = init_runtime()
    return init_distributed(runtime), runtime, runtime.device


def main(argv: list[str] | None = None) -> None:
    configure_logging()
    args = parse_args(argv)
    dist, runtime, device = _init_group()
    world = dist.world_size
    ones = dist.all_reduce_sum(torch.ones(args.elements, device=device), runtime)
    ranks = dist.all_reduce_sum(torch.full((args.elements,), float(dist.rank + 1), device=device), runtime)
    expected_ranks = world * (world + 1) / 2
    ok = bool(torch.all(ones == world)) and bool(torch.all(ranks == expected_ranks))
    print(
        f"rank {dist.rank}/{world} backend={dist.backend or 'none'} runtime={runtime.name}: "
        f"sum(ones)={ones[0].item():g} (want {world}), sum(rank+1)={ranks[0].item():g} (want {expected_ranks:g})",
        flush=True,
    )
    bus_gbps = None
    if args.bandwidth_mb > 0 and args.iterations > 0:
        payload = torch.ones(int(args.bandwidth_mb * 1024 * 1024 / 4), device=device)
        dist.all_reduce_sum(payload, runtime)  # warm-up (and, on XLA, the compilation)
        start = time.perf_counter()
        for _ in range(args.iterations):
            dist.all_reduce_sum(payload, runtime)
        seconds = (time.perf_counter() - start) / args.iterations
        # ring all-reduce moves 2(W-1)/W of the buffer through each rank's link
        bus_gbps = payload.numel() * 4 * 2 * (world - 1) / max(world, 1) / seconds / 1e9
    dist.barrier()
    if dist.is_main and args.output_uri:
        uris.write_json(
            uris.join(args.output_uri, boundary.ALLREDUCE_FILE),
            {
                "ok": ok,
                "world_size": world,
                "sum_ones": ones[0].item(),
                "sum_ranks": ranks[0].item(),
                "backend": dist.backend,
                "runtime": runtime.name,
                "bus_bandwidth_gbps": bus_gbps,
            },
        )
    dist.close()
    if not ok:
        print(f"rank {dist.rank}: all-reduce sums are wrong: the cluster is not healthy", file=sys.stderr, flush=True)
        sys.exit(EXIT_MISMATCH)


if __name__ == "__main__":
    lean_exit.run(main)
