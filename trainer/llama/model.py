"""Building, loading and saving the Llama model (transformers' ``LlamaForCausalLM``) on the host."""

from __future__ import annotations

import json
from typing import Any

import torch

from trainer.common import uri as uris
from trainer.common.errors import BadInputError
from trainer.llama.presets import llama_config

WEIGHTS = "model.safetensors"
CONFIG = "config.json"


def build_config(preset: str, vocab_size: int, base_model_uri: str | None) -> Any:
    """The base model's own config when fine-tuning, else the preset's for this vocabulary."""
    from transformers import LlamaConfig

    if base_model_uri:
        config_uri = uris.join(base_model_uri, CONFIG)
        if not uris.exists(config_uri):
            raise BadInputError(f"base model {base_model_uri} has no {CONFIG}")
        config = LlamaConfig.from_dict(json.loads(uris.read_bytes(config_uri)))
        if config.vocab_size != vocab_size:
            raise BadInputError(
                f"base model vocabulary ({config.vocab_size}) differs from the data's tokenizer ({vocab_size}); "
                "prepare the data with the base model's tokenizer.json"
            )
        return config
    return llama_config(preset, vocab_size)


def new_model(config: Any, seed: int) -> torch.nn.Module:
    """Same seed, same initial weights on every rank."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    config._attn_implementation = "eager"  # one attention path on CPU, XLA and Neuron
    return LlamaForCausalLM(config)


def read_weights(base_model_uri: str) -> dict[str, torch.Tensor]:
    from safetensors.torch import load

    weights_uri = base_model_uri if base_model_uri.endswith(".safetensors") else uris.join(base_model_uri, WEIGHTS)
    if not uris.exists(weights_uri):
        raise BadInputError(f"no {WEIGHTS} at {base_model_uri}")
    return load(uris.read_bytes(weights_uri))


def load_base_weights(model: torch.nn.Module, base_model_uri: str) -> None:
    missing, unexpected = model.load_state_dict(read_weights(base_model_uri), strict=False)
    missing = [k for k in missing if not k.endswith("rotary_emb.inv_freq")]
    if missing or unexpected:
        raise BadInputError(f"base weights do not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")


def save_model(state_dict: dict[str, torch.Tensor], config: Any, output_uri: str) -> None:
    """``model.safetensors`` + ``config.json``: loadable by transformers' ``from_pretrained`` too."""
    from safetensors.torch import save

    tensors = {k: v.detach().contiguous().cpu() for k, v in state_dict.items()}
    uris.write_bytes(uris.join(output_uri, WEIGHTS), save(tensors, metadata={"format": "pt"}))
    values = config.to_dict()
    values.pop("_attn_implementation", None)
    values["architectures"] = ["LlamaForCausalLM"]
    uris.write_bytes(uris.join(output_uri, CONFIG), json.dumps(values, indent=2, sort_keys=True).encode())
