"""Building the Llama model (transformers' ``LlamaForCausalLM``) and filling it from a base checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint, Part
from trainium_trainer.llama.presets import llama_config


def build_config(preset: str, vocab_size: int, base: HFCheckpoint | str | None) -> Any:
    """The base model's own config when fine-tuning, else the preset's for this vocabulary.

    A base vocabulary larger than the tokenizer's is fine (checkpoints pad it); a smaller one is not.
    """
    if base:
        checkpoint = base if isinstance(base, HFCheckpoint) else HFCheckpoint(base)
        config = checkpoint.config()
        if config.vocab_size < vocab_size:
            raise BadInputError(
                f"base model vocabulary ({config.vocab_size}) is smaller than the data's tokenizer ({vocab_size}); "
                "prepare the data with the base model's tokenizer.json"
            )
        return config
    return llama_config(preset, vocab_size)


def new_model(config: Any, seed: int, attention: str = "eager") -> torch.nn.Module:
    """Same seed, same initial weights on every rank."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config._attn_implementation = attention  # eager: one attention path on CPU and XLA; native takes sdpa
    return LlamaForCausalLM(config)


def is_buffer_name(name: str) -> bool:
    return "rotary_emb." in name


def check_names(model_names: list[str], checkpoint: HFCheckpoint, config: Any) -> None:
    """The checkpoint holds exactly the model's weights (a tied LM head may be absent): checked from the
    index before any tensor is read."""
    wanted = {n for n in model_names if not is_buffer_name(n)}
    have = set(checkpoint.weight_map)
    missing = sorted(wanted - have)
    if getattr(config, "tie_word_embeddings", False):
        missing = [n for n in missing if n != "lm_head.weight"]
    unexpected = sorted(n for n in have - wanted if not is_buffer_name(n))
    if missing or unexpected:
        raise BadInputError(
            f"base weights at {checkpoint.uri} do not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )


def load_weights(
    model: torch.nn.Module,
    checkpoint: HFCheckpoint,
    config: Any,
    part_of: Callable[[str], Part | None] = lambda name: None,
) -> int:
    """Copy the checkpoint into the model's parameters in place, shard file by shard file, each tensor
    read once (only this rank's ``part_of`` it); returns the number of tensors read."""
    params = dict(model.named_parameters(remove_duplicate=False))
    check_names(list(params), checkpoint, config)
    names = [n for n in params if n in checkpoint.weight_map]
    count = 0
    with torch.no_grad():
        for name, tensor in checkpoint.read(names, part_of):
            target = params[name]
            if tuple(target.shape) != tuple(tensor.shape):
                raise BadInputError(
                    f"base weight {name} has shape {tuple(tensor.shape)}, the model expects {tuple(target.shape)}"
                )
            target.copy_(tensor)
            count += 1
    return count


def base_model(config: Any, seed: int, checkpoint: HFCheckpoint | None, attention: str = "eager") -> torch.nn.Module:
    """The whole model on this host: the seeded initialization, overwritten by the base weights if any."""
    model = new_model(config, seed, attention)
    if checkpoint is not None:
        load_weights(model, checkpoint, config)
    return model
