"""Our model flavours and data as a TorchTitan ``TrainSpec``, registered the way TorchTitan documents for a
model defined outside it (``torchtitan.protocols.train_spec.register_train_spec``).

The spec is TorchTitan's Llama 3 one (its ``Transformer``, ``parallelize_llama``, optimizer, schedule, loss
and ``Llama3StateDictAdapter``) with two changes: the flavours include our presets' shapes next to
TorchTitan's ``debugmodel``, and the dataloader reads the data job's pre-tokenized blocks (``index.json`` +
``train/*.npy``) in the same order the native trainer does (``DataOrder``), instead of streaming a Hugging Face
dataset from the hub: the job trains on its own local corpus, and both trainers see the same batches.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from trainium_trainer.llama.presets import PRESETS, get_preset

#: The name the job config's ``model.name`` selects.
SPEC_NAME = "trainium_llama3"
#: TorchTitan's own Llama 3 flavour for smoke runs (dim 256, 6 layers, 16 heads), vocabulary ours.
DEBUG_FLAVOR = "debugmodel"
#: What ``--flavor`` offers: TorchTitan's debug model and our presets with their own output weight (a preset
#: that ties its embeddings has no TorchTitan Llama 3 form, see :func:`preset_args`).
FLAVORS: tuple[str, ...] = (DEBUG_FLAVOR, *sorted(n for n, p in PRESETS.items() if not p.tie_word_embeddings))
#: TorchTitan's cross entropy skips these labels (``torchtitan.components.loss.IGNORE_INDEX``).
IGNORE_INDEX = -100
_MULTIPLES = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


def ffn_dim(dim: int, multiple_of: int, multiplier: float | None = None) -> int:
    """TorchTitan's SwiGLU hidden size for ``dim`` (``FeedForward``: 2/3 of 4*dim, scaled, rounded up)."""
    hidden = int(2 * 4 * dim / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def ffn_shape(dim: int, intermediate: int) -> tuple[int, float | None]:
    """``(multiple_of, ffn_dim_multiplier)`` for which TorchTitan's SwiGLU size of ``dim`` is ``intermediate``:
    a power-of-two rounding where one fits (how TorchTitan's own flavours are written), else the exact
    multiplier with no rounding."""
    for multiple in _MULTIPLES:
        if ffn_dim(dim, multiple) == intermediate:
            return multiple, None
    multiplier = (intermediate + 0.5) / int(2 * 4 * dim / 3)
    assert ffn_dim(dim, 1, multiplier) == intermediate
    return 1, multiplier


def preset_args(preset: str, vocab_size: int) -> Any:
    """TorchTitan ``TransformerModelArgs`` with exactly the preset's shapes, RoPE and norm eps (Hugging Face
    Llama's 1e-6), so the exported model is the preset's ``LlamaForCausalLM``. No RoPE scaling is factor 1,
    the identity in TorchTitan's Llama 3 scaling. A preset with tied embeddings has no TorchTitan Llama 3 form
    (its ``output`` is its own weight)."""
    from torchtitan.models.llama3 import TransformerModelArgs
    from torchtitan.models.llama3.model.args import RoPEScalingArgs

    from trainium_trainer.common.errors import BadInputError

    p = get_preset(preset)
    if getattr(p, "tie_word_embeddings", False):
        raise BadInputError(f"preset {preset!r} ties its embeddings, which TorchTitan's Llama 3 does not; "
                            "train it with trainium_trainer.llama.train")  # fmt: skip
    scaling = getattr(p, "rope_scaling", None) or {}
    if scaling and scaling.get("rope_type") != "llama3":
        raise BadInputError(f"preset {preset!r}: RoPE scaling {scaling.get('rope_type')!r} is not TorchTitan's")
    rope = RoPEScalingArgs(
        scaling_factor=float(scaling.get("factor", 1.0)),
        low_freq_factor=float(scaling.get("low_freq_factor", 1.0)),
        high_freq_factor=float(scaling.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(scaling.get("original_max_position_embeddings", 8192)),
    )
    multiple, multiplier = ffn_shape(p.hidden_size, p.intermediate_size)
    return TransformerModelArgs(
        dim=p.hidden_size, n_layers=p.num_hidden_layers, n_heads=p.num_attention_heads,
        n_kv_heads=p.num_key_value_heads, vocab_size=p.vocab_size or vocab_size, multiple_of=multiple,
        ffn_dim_multiplier=multiplier, norm_eps=1e-6, rope_theta=float(getattr(p, "rope_theta", 10000.0)),
        rope_scaling_args=rope, max_seq_len=p.max_position_embeddings,
    )  # fmt: skip


def flavor_args(flavor: str, vocab_size: int) -> Any:
    """TorchTitan's debug model (our vocabulary) or one of our presets."""
    from torchtitan.models.llama3 import llama3_args

    if flavor == DEBUG_FLAVOR:
        return dataclasses.replace(copy.deepcopy(llama3_args[DEBUG_FLAVOR]), vocab_size=vocab_size)
    return preset_args(flavor, vocab_size)


class BlocksDataLoader:
    """Batches of the data job's blocks for one data-parallel rank, the blocks of step ``s`` being
    ``DataOrder.batch(s)``: the whole block in, the next tokens as labels with the last position ignored
    (TorchTitan's ``IGNORE_INDEX``), the loss Hugging Face's ``labels=x`` computes, at a sequence length that
    TorchTitan's ``2 * tp`` divisibility rule accepts. Its state is the step, so a resumed run reads on."""

    def __init__(self, data_uri: str, batch_size: int, dp_rank: int, dp_world_size: int, seed: int) -> None:
        from trainium_trainer.llama.data import load_blocks
        from trainium_trainer.llama.train import DataOrder

        self.blocks = torch.from_numpy(np.ascontiguousarray(load_blocks(data_uri, "train")))
        self.order = DataOrder(len(self.blocks), batch_size, dp_rank, dp_world_size, seed)
        if self.order.steps_per_epoch == 0:
            from trainium_trainer.common.errors import BadInputError

            raise BadInputError(f"{len(self.blocks)} training blocks is fewer than one batch of {batch_size} "
                                f"per rank x {dp_world_size} data-parallel ranks")  # fmt: skip
        self.step = 0

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        while True:
            x = self.blocks[torch.from_numpy(self.order.batch(self.step))].long()
            self.step += 1
            ignored = torch.full((x.shape[0], 1), IGNORE_INDEX, dtype=x.dtype)
            yield {"input": x}, torch.cat([x[:, 1:], ignored], dim=1)

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.step = int(state_dict["step"])


def gloo_safe(parallelize: Any) -> Any:
    """TorchTitan's ``parallelize_llama``, then, on gloo, FSDP's gradient reduce-scatter as a plain SUM.

    TorchTitan sets every FSDP module's gradient divide factor to 1 (it scales by the global token count
    itself), and FSDP2 then reduces with ``ReduceOp.PREMUL_SUM(1/1)``
    (``torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py``, ``_get_gradient_divide_factors``), which
    gloo refuses: "RuntimeError: Cannot use ReduceOp.PREMUL_SUM with Gloo". A premultiplied sum by 1 is a sum,
    which FSDP's ``set_force_sum_reduction_for_comms`` asks for; other backends keep TorchTitan's choice.
    """
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule

    def parallelize_for_gloo(model: torch.nn.Module, parallel_dims: Any, job_config: Any) -> torch.nn.Module:
        model = parallelize(model, parallel_dims, job_config)
        if dist.is_initialized() and dist.get_backend() == "gloo":
            for module in model.modules():
                if isinstance(module, FSDPModule):
                    module.set_force_sum_reduction_for_comms(True)
        return model

    return parallelize_for_gloo


def register(data_uri: str, flavor: str, vocab_size: int, seed: int) -> str:
    """Register :data:`SPEC_NAME` over ``data_uri`` with ``flavor``'s shapes; returns the name."""
    from torchtitan.components.dataloader import BaseDataLoader
    from torchtitan.models.llama3 import get_train_spec
    from torchtitan.protocols import train_spec as specs

    class Loader(BlocksDataLoader, BaseDataLoader):
        pass

    def build_dataloader(dp_world_size: int, dp_rank: int, tokenizer: Any, job_config: Any) -> Loader:
        return Loader(data_uri, job_config.training.local_batch_size, dp_rank, dp_world_size, seed)

    llama3 = get_train_spec()
    spec = dataclasses.replace(llama3, model_args={flavor: flavor_args(flavor, vocab_size)},
                               parallelize_fn=gloo_safe(llama3.parallelize_fn), build_dataloader_fn=build_dataloader,
                               build_tokenizer_fn=None, build_validator_fn=None)  # fmt: skip
    specs._extra_train_specs.pop(SPEC_NAME, None)  # a second run in one process (tests) replaces the first
    specs.register_train_spec(SPEC_NAME, spec)
    return SPEC_NAME
