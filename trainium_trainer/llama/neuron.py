"""The neuronx-distributed path: tensor parallel + ZeRO-1 + activation checkpointing on NeuronCores.

Imported only where ``neuronx_distributed`` is installed (the Neuron training image). The calls follow
the NxD Core training API: ``neuronx_distributed_config`` (with ``lnc_size`` for trn2),
``initialize_parallel_model``, ``initialize_parallel_optimizer``, ``save_checkpoint`` /
``load_checkpoint(tag=...)``, as neuronx-distributed v2.28.0 (tag ``v2.28.0``, commit 22cadad3, the
source of the image's 0.17.26814, Neuron SDK 2.28.0) defines them; the unit tests bind every call against
those signatures (tests/unit/trainium_trainer/llama/nxd_signatures.py).

Tensor parallelism is applied to transformers' Llama by swapping the attention and MLP projections for
NxD's column/row-parallel linears: q/k/v and gate/up split their output features, o/down their input
features, so each rank holds ``heads / tp`` attention heads (transformers reshapes with ``-1`` heads).
Embeddings and the LM head stay replicated. No rank ever holds the whole model: it is built on the meta
device, each rank allocates only its shards and reads only its slices of the base weights, and the
output is gathered one tensor at a time into the writing rank's shard files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint, Part
from trainium_trainer.llama.hf_export import (
    DEFAULT_MAX_SHARD_BYTES,
    ShardWriter,
    saved_names,
    tensor_bytes,
    write_config,
)
from trainium_trainer.llama.model import load_weights, new_model

COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
ROW = ("o_proj", "down_proj")


def available() -> bool:
    try:
        return importlib.util.find_spec("neuronx_distributed") is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class NeuronParallel:
    tensor_parallel_size: int = 1
    zero1: bool = True
    max_grad_norm: float = 1.0
    sequence_parallel: bool = False
    activation_checkpointing: bool = False
    lnc_size: int = 1

    def check(self, config: Any, world_size: int) -> None:
        tp = self.tensor_parallel_size
        problems = []
        if tp < 1 or world_size % tp:
            problems.append(f"tensor parallel size {tp} must divide the {world_size} ranks")
        if config.num_attention_heads % tp or config.num_key_value_heads % tp:
            problems.append(
                f"tensor parallel size {tp} must divide the attention heads ({config.num_attention_heads}) and "
                f"key/value heads ({config.num_key_value_heads})"
            )
        if self.sequence_parallel:
            problems.append(
                "sequence parallel needs NxD's own Llama modeling (sequence-first layouts around the norms); "
                "this trainer uses transformers' modeling with tensor-parallel projections only"
            )
        if problems:
            raise BadInputError("; ".join(problems))

    def config_kwargs(self) -> dict[str, Any]:
        """Arguments of ``neuronx_distributed.trainer.neuronx_distributed_config``."""
        return {
            "tensor_parallel_size": self.tensor_parallel_size,
            "optimizer_config": {
                "zero_one_enabled": self.zero1,
                "grad_clipping": self.max_grad_norm > 0,
                "max_grad_norm": self.max_grad_norm,
            },
            "sequence_parallel": self.sequence_parallel,
            "activation_checkpoint_config": "full" if self.activation_checkpointing else None,
            "lnc_size": self.lnc_size,
        }


def make_config(parallel: NeuronParallel) -> Any:
    import neuronx_distributed as nxd

    return nxd.neuronx_distributed_config(**parallel.config_kwargs())


def platform_lnc_size() -> int:
    """Logical NeuronCore size: ``NEURON_LOGICAL_NC_CONFIG`` if set (the runtime's own variable), else
    what neuronx-distributed detects for the platform (2 on trn2, 1 on trn1)."""
    env = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if env:
        return int(env)
    try:
        from neuronx_distributed.utils.model_utils import get_platform_lnc
    except ImportError:
        return 1
    return int(get_platform_lnc())


def part_for(tp: int, rank: int) -> Callable[[str], Part | None]:
    """Which piece of a full weight this tensor-parallel rank holds (``None``: the whole, replicated)."""

    def part_of(name: str) -> Part | None:
        child = name.rsplit(".", 2)[-2] if name.endswith(".weight") and name.count(".") >= 2 else ""
        if tp > 1 and child in COLUMN:
            return Part(0, rank, tp)
        if tp > 1 and child in ROW:
            return Part(1, rank, tp)
        return None

    return part_of


def shard(weight: torch.Tensor, name: str, tp: int, rank: int) -> torch.Tensor:
    """This rank's slice of a full projection weight (``[out, in]``)."""
    part = part_for(tp, rank)(f"x.{name}.weight")
    if part is None:
        return weight
    return weight.chunk(tp, dim=part.dim)[rank].contiguous()


def swap_projections(model: torch.nn.Module, device: torch.device | None = None) -> torch.nn.Module:
    """Replace q/k/v/gate/up with column-parallel and o/down with row-parallel linears (no weights yet
    when ``device`` is meta)."""
    from neuronx_distributed.parallel_layers.layers import ColumnParallelLinear, RowParallelLinear

    for module in list(model.modules()):
        for child_name in (*COLUMN, *ROW):
            linear = getattr(module, child_name, None)
            if not isinstance(linear, torch.nn.Linear):
                continue
            # the same sizes either way; a column's output stays split, a row's input arrives split
            like: dict[str, Any] = {"bias": False, "dtype": linear.weight.dtype, "device": device}
            if child_name in COLUMN:
                parallel = ColumnParallelLinear(linear.in_features, linear.out_features, gather_output=False, **like)
            else:
                parallel = RowParallelLinear(linear.in_features, linear.out_features, input_is_parallel=True, **like)
            setattr(module, child_name, parallel)
    return model


def materialize(model: torch.nn.Module, config: Any) -> torch.nn.Module:
    """Give every meta parameter host storage of its own (local, sharded) shape, keeping tied weights
    tied and the parallel attributes NxD set on them; rebuild the rotary embedding's buffers."""
    made: dict[int, torch.nn.Parameter] = {}
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None or not param.is_meta:
                continue
            if id(param) not in made:
                fresh = torch.nn.Parameter(torch.empty(param.shape, dtype=param.dtype), param.requires_grad)
                fresh.__dict__.update(param.__dict__)
                made[id(param)] = fresh
            module._parameters[name] = made[id(param)]
        rotary = getattr(module, "rotary_emb", None)
        if rotary is not None and any(b.is_meta for b in rotary.buffers()):
            module.rotary_emb = type(rotary)(config=config)
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"tensors left on the meta device: {left[:5]}")
    return model


def _seed_of(seed: int, name: str, piece: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}/{name}/{piece}".encode()).digest()[:8], "little") >> 1


def init_weights(model: torch.nn.Module, config: Any, seed: int, part_of: Callable[[str], Part | None]) -> None:
    """Fresh weights without a full-size tensor: norms 1, matrices N(0, initializer_range), each piece
    drawn from a generator seeded by (seed, name, piece), so replicated weights agree on every rank."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.ndim < 2:
                param.fill_(1.0)
                continue
            part = part_of(name)
            generator = torch.Generator().manual_seed(_seed_of(seed, name, part.index if part else 0))
            param.normal_(0.0, config.initializer_range, generator=generator)


def build_sharded(config: Any, seed: int, checkpoint: HFCheckpoint | None) -> torch.nn.Module:
    """This rank's model: built on the meta device, projections swapped for parallel linears, then
    host storage for this rank's shards only, filled from the checkpoint (this rank's slices) or seeded."""
    from neuronx_distributed.parallel_layers import parallel_state

    tp = parallel_state.get_tensor_model_parallel_size()
    rank = parallel_state.get_tensor_model_parallel_rank()
    with torch.device("meta"):
        model = new_model(config, seed)
    swap_projections(model, device=torch.device("meta"))
    materialize(model, config)
    part_of = part_for(tp, rank)
    if checkpoint is not None:
        load_weights(model, checkpoint, config, part_of)
    else:
        init_weights(model, config, seed, part_of)
    return model


def parallel_model(nxd_config: Any, config: Any, seed: int, checkpoint: HFCheckpoint | None) -> torch.nn.Module:
    import neuronx_distributed as nxd

    model: torch.nn.Module = nxd.initialize_parallel_model(nxd_config, lambda: build_sharded(config, seed, checkpoint))
    return model


def model_bytes(config: Any, tp: int = 1, bytes_per_param: int = 4) -> int:
    """Host bytes of the weights one rank holds: the projections' 1/tp share plus the replicated rest
    (embedding, LM head unless tied, norms). ``tp=1`` is the whole model."""
    h: int = config.hidden_size
    layers: int = config.num_hidden_layers
    inter: int = config.intermediate_size
    head_dim: int = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q: int = config.num_attention_heads * head_dim
    kv: int = config.num_key_value_heads * head_dim
    sharded = layers * (2 * h * q + 2 * h * kv + 3 * h * inter)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    replicated: int = config.vocab_size * h * (1 if tied else 2) + (2 * layers + 1) * h
    return (sharded // tp + replicated) * bytes_per_param


def check_host_memory(config: Any, tp: int, local_ranks: int, host_bytes: int | None) -> int:
    """Refuse a layout whose ranks' weights alone exceed the host's memory; returns bytes per rank."""
    per_rank = model_bytes(config, tp)
    if host_bytes and per_rank * local_ranks > host_bytes:
        raise BadInputError(
            f"{local_ranks} ranks x {per_rank / 2**30:.1f} GiB of weights each exceed this host's "
            f"{host_bytes / 2**30:.0f} GiB: raise --tensor-parallel-size"
        )
    return per_rank


def host_memory_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def parallel_optimizer(nxd_config: Any, model: torch.nn.Module, lr: float, weight_decay: float) -> Any:
    import neuronx_distributed as nxd

    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    for name, param in model.named_parameters():
        (no_decay if param.ndim < 2 or "norm" in name else decay).append(param)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return nxd.initialize_parallel_optimizer(nxd_config, torch.optim.AdamW, groups, lr=lr, betas=(0.9, 0.95))


def data_parallel_layout() -> tuple[int, int]:
    """(rank, size) of this process among the data-parallel replicas: data is sharded by these."""
    from neuronx_distributed.parallel_layers import parallel_state

    return parallel_state.get_data_parallel_rank(), parallel_state.get_data_parallel_size()


def checkpoint_tag(step: int) -> str:
    return f"step_{step:08d}"


def save(
    path: str, step: int, model: Any, optimizer: Any, scheduler: Any, user_content: dict[str, Any], keep_last: int
) -> str:
    """Sharded NxD checkpoint under ``path/<tag>``; every rank calls it (ZeRO-1 saves optimizer shards)."""
    import neuronx_distributed as nxd

    tag = checkpoint_tag(step)
    nxd.save_checkpoint(
        path,
        tag=tag,
        model=model,
        optimizer=optimizer,
        scheduler=scheduler,
        user_content=user_content,
        num_kept_ckpts=keep_last,
        use_xser=True,
    )
    return tag


def load(path: str, tag: str, model: Any, optimizer: Any, scheduler: Any) -> dict[str, Any] | None:
    """Restore model, optimizer and scheduler from ``path/<tag>``; returns the saved user content."""
    import neuronx_distributed as nxd

    user_content: dict[str, Any] | None = nxd.load_checkpoint(
        path, tag=tag, model=model, optimizer=optimizer, scheduler=scheduler
    )
    return user_content


def save_full_model(
    model: Any,
    config: Any,
    output_uri: str | None,
    write: bool,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    gather: Callable[[torch.Tensor, int], torch.Tensor] | None = None,
    sync: Callable[[], None] | None = None,
) -> list[str]:
    """Every rank joins the tensor-parallel all-gathers, one tensor at a time; only the ``write`` rank
    copies each gathered tensor to its host and streams it into the shards. No rank holds the full state
    dict: the writer holds at most one output shard. ``write=False`` on every rank (the compile trial) runs
    the same gathers and writes nothing.

    ``model`` is NxD's ``NxDModel``; without pipeline parallelism its ``state_dict()`` is the wrapped
    module's, names unprefixed (neuronx-distributed v2.28.0, ``trainium_trainer/model.py``)."""
    from neuronx_distributed.parallel_layers import parallel_state

    tp = parallel_state.get_tensor_model_parallel_size()
    if gather is None or sync is None:
        import torch_xla.core.xla_model as xm

        groups = parallel_state.get_tensor_model_parallel_group(as_list=True)
        gather = gather or (lambda t, dim: xm.all_gather(t, dim=dim, groups=groups))
        sync = sync or xm.mark_step
    state = model.state_dict()
    part_of = part_for(tp, 0)
    names = saved_names(state, config)
    sizes = [(n, tensor_bytes(state[n]) * (tp if part_of(n) else 1)) for n in names]
    if write and not output_uri:
        raise ValueError("the writing rank needs an output URI")
    writer = ShardWriter(output_uri, sizes, max_shard_bytes) if write and output_uri else None
    for name in names:
        value = state[name]
        part = part_of(name)
        if part is not None:
            value = gather(value, part.dim)
            sync()  # every rank runs the collective; only the writer reads the result back
        if writer is not None:
            writer.add(name, value)
    if writer is None or output_uri is None:
        return []
    files = writer.finish()
    write_config(config, output_uri)
    return files


def memory_table(presets: dict[str, Any], instances: dict[str, tuple[int, int]], vocab: int = 32000) -> list[str]:
    """Rows of docs/llama.md's host memory table: per preset and instance type (ranks per node, host GiB),
    the smallest tensor-parallel size whose weights fit, and the fp32 weights each rank then holds."""
    from trainium_trainer.llama.presets import llama_config

    rows = []
    for name, preset in presets.items():
        config = llama_config(preset, vocab)
        for instance, (ranks, host_gib) in instances.items():
            sizes = [t for t in (1, 2, 4, 8, 16, 32, 64) if not ranks % t and not config.num_key_value_heads % t]
            fitting = [t for t in sizes if model_bytes(config, t) * ranks <= host_gib * 2**30]
            if not fitting:
                rows.append(f"| `{name}` | {instance} | {ranks} | none fits | | | {host_gib} |")
                continue
            tp = fitting[0]
            per_rank = model_bytes(config, tp) / 2**30
            rows.append(
                f"| `{name}` | {instance} | {ranks} | {tp} | {per_rank:.2f} | {per_rank * ranks:.1f} | {host_gib} |"
            )
    return rows
