"""The process group, the 2-D ``(dp, tp)`` device mesh and the Llama parallelization plan on it.

Tensor parallel (DTensor, ``parallelize_module``): each decoder layer's q/k/v and gate/up projections are
split by output features (``ColwiseParallel``), o/down by input features (``RowwiseParallel``), so each
layer's attention and MLP need one all-reduce each; embeddings, norms and the LM head stay whole. The heads
split evenly because transformers' attention reshapes to ``(-1, head_dim)``. Then FSDP2 (``fully_shard``)
shards every decoder layer and the root over ``dp``.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Protocol

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.native.device import NativeDevice

COLWISE = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj")
ROWWISE = ("self_attn.o_proj", "mlp.down_proj")


@dataclass(frozen=True)
class Layout:
    """This rank's place: ``world = dp x tp``; ranks of one ``dp`` coordinate read the same batch."""

    rank: int
    world_size: int
    tensor_parallel_size: int

    @property
    def data_parallel_size(self) -> int:
        return self.world_size // self.tensor_parallel_size

    @property
    def data_rank(self) -> int:
        return self.rank // self.tensor_parallel_size  # init_device_mesh is row-major: tp is the inner dim

    @property
    def is_main(self) -> bool:
        return self.rank == 0


class ModelShape(Protocol):
    """The sizes tensor parallelism splits (a transformers ``LlamaConfig`` has them)."""

    @property
    def num_attention_heads(self) -> int: ...

    @property
    def num_key_value_heads(self) -> int: ...

    @property
    def intermediate_size(self) -> int: ...


def check_layout(world_size: int, tp: int, config: ModelShape) -> None:
    """Refuse a layout the model cannot be split into, before any collective runs."""
    if tp < 1 or world_size % tp:
        raise BadInputError(f"--tensor-parallel-size {tp} does not divide the {world_size} ranks")
    heads, kv = config.num_attention_heads, config.num_key_value_heads
    inter = config.intermediate_size
    for what, n in (("attention heads", heads), ("key/value heads", kv), ("intermediate size", inter)):
        if n % tp:
            raise BadInputError(f"--tensor-parallel-size {tp} does not divide the model's {n} {what}")


def init_process_group(device: NativeDevice) -> Layout:
    """torchrun's ``env://`` rendezvous with the device's backend; a lone process needs none."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if not dist.is_initialized():
        if device.type == "neuron":
            import torch_neuronx  # noqa: F401  (registers the neuron process group backend)
        # a lone process (no torchrun) still needs a group for the mesh: a private loopback one
        method = "env://" if "MASTER_ADDR" in os.environ else f"tcp://127.0.0.1:{_free_port()}"
        dist.init_process_group(device.backend, init_method=method, rank=rank, world_size=world)
    return Layout(rank, world, 1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def device_mesh(device: NativeDevice, layout: Layout) -> DeviceMesh:
    shape = (layout.data_parallel_size, layout.tensor_parallel_size)
    return init_device_mesh(device.type, shape, mesh_dim_names=("dp", "tp"))


def parallelize_llama(model: torch.nn.Module, mesh: DeviceMesh, param_dtype: torch.dtype | None) -> torch.nn.Module:
    """TP over ``mesh["tp"]`` (when larger than 1), then FSDP2 over ``mesh["dp"]``, in place."""
    layers = model.get_submodule("model.layers")  # a transformers Llama's decoder layers
    assert isinstance(layers, torch.nn.ModuleList)
    if mesh["tp"].size() > 1:
        plan: dict[str, ParallelStyle] = {name: ColwiseParallel() for name in COLWISE}
        plan |= {name: RowwiseParallel() for name in ROWWISE}
        for layer in layers:
            parallelize_module(layer, mesh["tp"], plan)
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    for layer in layers:
        fully_shard(layer, mesh=mesh["dp"], mp_policy=policy)
    fully_shard(model, mesh=mesh["dp"], mp_policy=policy)
    return model


def clip_grad_norm(params: list[torch.nn.Parameter], max_norm: float) -> torch.Tensor:
    """The global gradient norm, clipped to ``max_norm``, with one reduction per device mesh.

    FSDP-only parameters (the embeddings, norms and LM head on the 1-D ``dp`` mesh) and TP+FSDP ones (2-D) cannot
    share one DTensor norm, so each mesh's gradients get their own (``get_total_norm``, made whole once), and
    the squares add up. A norm made whole per parameter cost one collective per tensor every step.
    """
    groups: dict[object, list[torch.nn.Parameter]] = {}
    for p in params:
        if p.grad is not None:
            groups.setdefault(p.grad.device_mesh if isinstance(p.grad, DTensor) else None, []).append(p)
    squares = []
    for group in groups.values():
        norm = torch.nn.utils.get_total_norm([p.grad for p in group if p.grad is not None], 2.0)  # all have one
        squares.append((norm.full_tensor() if isinstance(norm, DTensor) else norm).float() ** 2)
    total = torch.stack(squares).sum().sqrt()
    if max_norm > 0:
        for group in groups.values():  # per mesh: one foreach call cannot mix the 1-D and 2-D meshes
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)
    return total
