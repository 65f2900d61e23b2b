"""Writing a trained model as a Hugging Face model directory that ``from_pretrained`` loads.

Weights go into safetensors shards of at most ``max_shard_bytes`` (5 GB, ``save_pretrained``'s default),
named ``model-00001-of-0000N.safetensors`` with ``model.safetensors.index.json``, or a single
``model.safetensors`` when they fit in one. The shard plan is made from the tensors' sizes before any
tensor exists, so a writer that receives the tensors one at a time (gathered from tensor-parallel ranks)
holds at most one shard in memory.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Iterable
from typing import Any

import torch

from trainium_trainer.common import uri as uris
from trainium_trainer.llama.hf_checkpoint import CONFIG, INDEX, WEIGHTS

DEFAULT_MAX_SHARD_BYTES = 5 * 10**9
TOKENIZER_FILES = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.model", "generation_config.json")


def shard_plan(sizes: Iterable[tuple[str, int]], max_shard_bytes: int) -> list[list[str]]:
    """Tensors in order, a new shard whenever the next one would overflow (a lone oversized tensor
    gets a shard of its own), as ``save_pretrained`` splits."""
    shards: list[list[str]] = [[]]
    filled = 0
    for name, size in sizes:
        if shards[-1] and filled + size > max_shard_bytes:
            shards.append([])
            filled = 0
        shards[-1].append(name)
        filled += size
    return shards if shards[0] else []


def shard_file_names(count: int) -> list[str]:
    if count == 1:
        return [WEIGHTS]
    return [f"model-{i:05d}-of-{count:05d}.safetensors" for i in range(1, count + 1)]


def _write_safetensors(tensors: dict[str, torch.Tensor], file_uri: str) -> None:
    """Serialized to a local file first (no second copy in memory), then moved or uploaded whole."""
    from safetensors.torch import save_file

    local = uris.local_path(file_uri)
    folder = os.path.dirname(local) if local else None
    if folder:
        os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{uuid.uuid4().hex}-", suffix=".safetensors", dir=folder)
    os.close(fd)
    try:
        save_file(tensors, tmp, metadata={"format": "pt"})
        if local:
            os.replace(tmp, local)
            return
        fs, path = uris.filesystem(file_uri)
        fs.put_file(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class ShardWriter:
    """Receives tensors in any order; writes each shard as soon as all its tensors arrived."""

    def __init__(self, output_uri: str, sizes: list[tuple[str, int]], max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES):
        self.output_uri = output_uri
        plan = shard_plan(sizes, max_shard_bytes)
        self.files = shard_file_names(len(plan))
        self.shard_of = {name: i for i, names in enumerate(plan) for name in names}
        self.pending = [set(names) for names in plan]
        self.buffers: list[dict[str, torch.Tensor]] = [{} for _ in plan]
        self.total_size = sum(size for _, size in sizes)

    def add(self, name: str, tensor: torch.Tensor) -> None:
        i = self.shard_of[name]
        self.buffers[i][name] = tensor.detach().to("cpu").contiguous()
        self.pending[i].discard(name)
        if not self.pending[i]:
            _write_safetensors(self.buffers[i], uris.join(self.output_uri, self.files[i]))
            self.buffers[i] = {}

    def finish(self) -> list[str]:
        """Write the index (several shards); returns the file names. Every tensor must have arrived."""
        missing = sorted(name for names in self.pending for name in names)
        if missing:
            raise RuntimeError(f"tensors never written: {missing[:5]}")
        if len(self.files) > 1:
            weight_map = {name: self.files[i] for name, i in sorted(self.shard_of.items())}
            index = {"metadata": {"total_size": self.total_size}, "weight_map": weight_map}
            uris.write_json(uris.join(self.output_uri, INDEX), index)
        return list(self.files)


def config_json(config: Any, dtype: torch.dtype = torch.float32) -> bytes:
    """``config.json`` as ``save_pretrained`` writes it, with the dtype the weights are stored in."""
    values = config.to_dict()
    values.pop("_attn_implementation", None)
    values.pop("_attn_implementation_autoset", None)
    values["architectures"] = ["LlamaForCausalLM"]
    dtype_name = str(dtype).removeprefix("torch.")
    keys = [k for k in ("dtype", "torch_dtype") if k in values] or ["torch_dtype"]
    for key in keys:
        values[key] = dtype_name
    return json.dumps(values, indent=2, sort_keys=True).encode()


def saved_names(state_names: Iterable[str], config: Any) -> list[str]:
    """What goes into the files: tied LM head left out (``from_pretrained`` re-ties it); buffers dropped."""
    tied = bool(getattr(config, "tie_word_embeddings", False))
    return [n for n in state_names if not n.endswith("rotary_emb.inv_freq") and not (tied and n == "lm_head.weight")]


def save_model(
    state_dict: dict[str, torch.Tensor],
    config: Any,
    output_uri: str,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
) -> list[str]:
    """A full state dict on this host -> shards (+ index) + ``config.json``; returns the weight files."""
    names = saved_names(state_dict, config)
    writer = ShardWriter(output_uri, [(n, tensor_bytes(state_dict[n])) for n in names], max_shard_bytes)
    for name in names:
        writer.add(name, state_dict[name])
    files = writer.finish()
    write_config(config, output_uri)
    return files


def tensor_bytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def write_config(config: Any, output_uri: str) -> None:
    uris.write_bytes(uris.join(output_uri, CONFIG), config_json(config))


def write_tokenizer(output_uri: str, data_uri: str, base_model_uri: str | None, max_length: int) -> None:
    """``tokenizer.json`` the data was prepared with, plus what ``AutoTokenizer`` needs around it: the
    base model's own tokenizer files when it has them, else a ``tokenizer_config.json`` for it."""
    from trainium_trainer.llama.tokenizer import BOS, EOS, PAD, UNK

    uris.write_bytes(uris.join(output_uri, "tokenizer.json"), uris.read_bytes(uris.join(data_uri, "tokenizer.json")))
    copied = set()
    if base_model_uri:
        for name in TOKENIZER_FILES:
            source = uris.join(base_model_uri, name)
            if uris.exists(source):
                uris.write_bytes(uris.join(output_uri, name), uris.read_bytes(source))
                copied.add(name)
    if "tokenizer_config.json" not in copied:
        uris.write_json(
            uris.join(output_uri, "tokenizer_config.json"),
            {
                "tokenizer_class": "PreTrainedTokenizerFast",
                "bos_token": BOS,
                "eos_token": EOS,
                "unk_token": UNK,
                "pad_token": PAD,
                "model_max_length": max_length,
            },
        )
