"""TorchTitan's DCP checkpoint -> a Hugging Face Llama directory, with TorchTitan's own
``Llama3StateDictAdapter.to_hf`` for the names and the RoPE permutation of q/k.

The shards are read through ``trainium_trainer.native.checkpoint`` (DCP metadata through its allow-list, non-tensor
entries as plain data only), so a checkpoint folder someone else can write cannot run code here; the tensors
are allocated from the metadata, without building the model.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.distributed.checkpoint.metadata import TensorStorageMetadata

from trainium_trainer.common import uri as uris
from trainium_trainer.common.checkpoint import CheckpointError
from trainium_trainer.native import checkpoint as dcp_checkpoint


def hf_config(args: Any) -> Any:
    """The ``LlamaConfig`` that computes what TorchTitan's ``Transformer`` with ``args`` does."""
    from transformers import LlamaConfig

    from trainium_trainer.titan.spec import ffn_dim

    scaling = args.rope_scaling_args
    rope_scaling = None
    if scaling.scaling_factor != 1.0:
        rope_scaling = {"rope_type": "llama3", "factor": scaling.scaling_factor,
                        "low_freq_factor": scaling.low_freq_factor, "high_freq_factor": scaling.high_freq_factor,
                        "original_max_position_embeddings": scaling.original_max_position_embeddings}  # fmt: skip
    return LlamaConfig(
        hidden_size=args.dim, intermediate_size=ffn_dim(args.dim, args.multiple_of, args.ffn_dim_multiplier),
        num_hidden_layers=args.n_layers, num_attention_heads=args.n_heads,
        num_key_value_heads=args.n_kv_heads or args.n_heads, vocab_size=args.vocab_size,
        rms_norm_eps=args.norm_eps, rope_theta=args.rope_theta, rope_scaling=rope_scaling,
        max_position_embeddings=args.max_seq_len, tie_word_embeddings=False, attention_dropout=0.0,
    )  # fmt: skip


def checkpoint_steps(folder: str) -> list[int]:
    """The steps TorchTitan checkpointed in ``folder`` (its ``step-<N>`` directories), oldest first."""
    if not uris.exists(folder):
        return []
    names = uris.list_names(folder)
    return sorted(int(n.removeprefix("step-")) for n in names if n.startswith("step-") and n[5:].isdigit())


def read_model_state(step_dir: str) -> dict[str, torch.Tensor]:
    """Every tensor of the model-only checkpoint at ``step_dir``, whole, on this host."""
    metadata = dcp_checkpoint.read_metadata(uris.read_bytes(uris.join(step_dir, ".metadata")))
    state: dict[str, Any] = {}
    for name, meta in metadata.state_dict_metadata.items():
        if not isinstance(meta, TensorStorageMetadata):
            raise CheckpointError(f"{step_dir}: {name!r} is not a tensor; a model-only checkpoint holds tensors")
        state[name] = torch.empty(meta.size, dtype=meta.properties.dtype)
    dcp_checkpoint.read_state(state, step_dir)
    return state


def to_hugging_face(step_dir: str, args: Any, output_uri: str, max_shard_bytes: int | None = None) -> list[str]:
    """Write the checkpoint at ``step_dir`` as a Hugging Face directory at ``output_uri``; returns its files."""
    from torchtitan.models.llama3 import Llama3StateDictAdapter

    from trainium_trainer.llama.hf_export import DEFAULT_MAX_SHARD_BYTES, save_model

    state = read_model_state(step_dir)
    hf_state = Llama3StateDictAdapter(args, None).to_hf(state)
    return save_model({k: v.contiguous() for k, v in hf_state.items()}, hf_config(args), output_uri,
                      max_shard_bytes or DEFAULT_MAX_SHARD_BYTES)  # fmt: skip
