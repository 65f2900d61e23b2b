"""The neuronx-distributed path: tensor parallel + ZeRO-1 + activation checkpointing on NeuronCores.

Imported only where ``neuronx_distributed`` is installed (the Neuron training image). The calls follow
the documented NxD Core training API: ``neuronx_distributed_config``, ``initialize_parallel_model``,
``initialize_parallel_optimizer``, ``save_checkpoint`` / ``load_checkpoint(tag=...)``.

Tensor parallelism is applied to transformers' Llama by swapping the attention and MLP projections for
NxD's column/row-parallel linears: q/k/v and gate/up split their output features, o/down their input
features, so each rank holds ``heads / tp`` attention heads (transformers reshapes with ``-1`` heads).
Embeddings and the LM head stay replicated.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

from trainer.common.errors import BadInputError

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
        }


def make_config(parallel: NeuronParallel) -> Any:
    import neuronx_distributed as nxd

    return nxd.neuronx_distributed_config(**parallel.config_kwargs())


def shard(weight: torch.Tensor, name: str, tp: int, rank: int) -> torch.Tensor:
    """This rank's slice of a full projection weight (``[out, in]``)."""
    if tp == 1:
        return weight
    if name in COLUMN:
        return weight.chunk(tp, dim=0)[rank].contiguous()
    if name in ROW:
        return weight.chunk(tp, dim=1)[rank].contiguous()
    return weight


def apply_tensor_parallel(model: torch.nn.Module, full_weights: dict[str, torch.Tensor] | None) -> torch.nn.Module:
    """Swap the projections for NxD parallel linears holding this rank's shard of the weights."""
    from neuronx_distributed.parallel_layers import parallel_state
    from neuronx_distributed.parallel_layers.layers import ColumnParallelLinear, RowParallelLinear

    tp = parallel_state.get_tensor_model_parallel_size()
    rank = parallel_state.get_tensor_model_parallel_rank()
    for module_name, module in list(model.named_modules()):
        for child_name in (*COLUMN, *ROW):
            linear = getattr(module, child_name, None)
            if not isinstance(linear, torch.nn.Linear):
                continue
            if child_name in COLUMN:
                parallel = ColumnParallelLinear(
                    linear.in_features, linear.out_features, bias=False, gather_output=False, dtype=linear.weight.dtype
                )
            else:
                parallel = RowParallelLinear(
                    linear.in_features,
                    linear.out_features,
                    bias=False,
                    input_is_parallel=True,
                    dtype=linear.weight.dtype,
                )
            key = f"{module_name}.{child_name}.weight"
            source = full_weights[key] if full_weights is not None and key in full_weights else linear.weight.data
            with torch.no_grad():
                parallel.weight.copy_(shard(source, child_name, tp, rank))
            setattr(module, child_name, parallel)
    return model


def parallel_model(nxd_config: Any, build: Any, full_weights: dict[str, torch.Tensor] | None) -> torch.nn.Module:
    import neuronx_distributed as nxd

    def model_fn() -> torch.nn.Module:
        model = build()
        if full_weights is not None:
            model.load_state_dict(full_weights, strict=False)
        return apply_tensor_parallel(model, full_weights)

    return nxd.initialize_parallel_model(nxd_config, model_fn)


def parallel_optimizer(nxd_config: Any, model: torch.nn.Module, lr: float, weight_decay: float) -> Any:
    import neuronx_distributed as nxd

    decay, no_decay = [], []
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

    return nxd.load_checkpoint(path, tag=tag, model=model, optimizer=optimizer, scheduler=scheduler)


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """Weights for ``model.safetensors``: gather the TP shards into full tensors on the host."""
    import torch_xla.core.xla_model as xm
    from neuronx_distributed.parallel_layers import parallel_state

    tp = parallel_state.get_tensor_model_parallel_size()
    inner = model.local_module() if hasattr(model, "local_module") else model
    state = {}
    for key, value in inner.state_dict().items():
        name = key.rsplit(".", 2)[-2] if key.endswith(".weight") else ""
        if tp > 1 and name in COLUMN + ROW:
            dim = 0 if name in COLUMN else 1
            value = xm.all_gather(value, dim=dim, groups=parallel_state.get_tensor_model_parallel_group(as_list=True))
        state[key] = value
    return xm._maybe_convert_to_cpu(state)
