"""A Hugging Face base model into the native stack's sharded model, each rank reading only its own shards.

The model is built on the ``meta`` device (no host copy of the whole model per rank), split by the same TP and
FSDP2 plan as a fresh run, given real storage, and then filled by ``torch.distributed.checkpoint`` through
torch's ``HuggingFaceStorageReader``: DCP plans, for every rank, the slices of each safetensors tensor that its
DTensor shards hold, and the reader reads only those slices (``safe_open(...).get_slice``). Remote shard files
(``s3://``) are first copied once per node into the node's weights cache by :class:`HFCheckpoint`.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.distributed.checkpoint import state_dict_loader
from torch.distributed.checkpoint.hf_storage import HuggingFaceStorageReader
from torch.distributed.checkpoint.metadata import TensorStorageMetadata
from torch.distributed.checkpoint.planner import LoadPlan, LoadPlanner
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.futures import Future

from trainium_trainer.common.errors import BadInputError
from trainium_trainer.llama.hf_checkpoint import HFCheckpoint
from trainium_trainer.llama.model import base_model, check_names, new_model


@dataclass(frozen=True)
class BaseRead:
    """What this rank read of the base: elements of the tensors it loaded, and of those tensors in all."""

    elements_read: int
    elements_total: int
    tensors: int

    @property
    def fraction(self) -> float:
        return self.elements_read / self.elements_total if self.elements_total else 0.0


class CountingReader(HuggingFaceStorageReader):
    """torch's Hugging Face reader, counting the elements this rank's load plan asks for."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.elements_read = 0

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        self.elements_read += sum(math.prod(item.lengths) for item in plan.items)
        return super().read_data(plan, planner)


def staged_directory(checkpoint: HFCheckpoint, into: str) -> str:
    """A local folder holding exactly the index's shard files (links to local or node-cached copies): the
    reader reads every ``*.safetensors`` file of its folder, and a stray file beside the shards must not count."""
    for name in sorted(set(checkpoint.weight_map.values())):
        os.symlink(checkpoint.local_file(name), os.path.join(into, name.replace("/", "__")))
    return into


def rebuild_buffers(model: torch.nn.Module, config: Any, device: torch.device) -> None:
    """``to_empty`` leaves non-persistent buffers uninitialized: the rotary frequencies come from the config."""
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    rotary = model.get_submodule("model.rotary_emb")
    assert isinstance(rotary, LlamaRotaryEmbedding)  # new_model builds a transformers LlamaForCausalLM
    inv_freq, rotary.attention_scaling = rotary.rope_init_fn(config, device)
    rotary.inv_freq = inv_freq
    rotary.original_inv_freq = inv_freq


def check_shapes(model_state: dict[str, Any], reader: HuggingFaceStorageReader, uri: str) -> int:
    """Every tensor's whole shape in the checkpoint equals the model's, refused by name before any read;
    returns the elements of those tensors."""
    stored = reader.read_metadata().state_dict_metadata
    total = 0
    for name, value in model_state.items():
        entry = stored[name]
        assert isinstance(entry, TensorStorageMetadata)  # safetensors files hold tensors only
        have, want = tuple(entry.size), tuple(value.shape)  # a DTensor's shape is the global one
        if have != want:
            raise BadInputError(f"base weight {name} at {uri} has shape {have}, the model expects {want}")
        total += math.prod(want)
    return total


def load_sharded_base(
    config: Any,
    checkpoint: HFCheckpoint,
    seed: int,
    parallelize: Callable[[torch.nn.Module], torch.nn.Module],
    device: torch.device,
    attention: str = "eager",
) -> tuple[torch.nn.Module, BaseRead]:
    """The parallelized model with the base's weights, this rank's shards only."""
    with torch.device("meta"):
        model = new_model(config, seed, attention)
    check_names([n for n, _ in model.named_parameters(remove_duplicate=False)], checkpoint, config)
    parallelize(model)
    model.to_empty(device=device)
    rebuild_buffers(model, config, device)
    state = {k: v for k, v in get_model_state_dict(model).items() if k in checkpoint.weight_map}
    with tempfile.TemporaryDirectory(prefix="hf-base-") as folder:
        reader = CountingReader(staged_directory(checkpoint, folder))
        total = check_shapes(state, reader, checkpoint.uri)
        state_dict_loader.load(state, storage_reader=reader)
    set_model_state_dict(model, state, options=StateDictOptions(strict=False))
    return model, BaseRead(reader.elements_read, total, len(state))


def seeded_init_on_node(config: Any, seed: int, folder: str) -> HFCheckpoint:
    """The seeded initialization as a Hugging Face directory in ``folder`` on this node's disk, written by the
    node's first rank alone, for :func:`load_sharded_base` to shard.

    Every rank building the whole model on the host first held one full fp32 copy per rank (64 on a trn2:
    more than its host memory for an 8B model); now the node holds one, briefly, and the values are the same
    seeded ones, so runs are unchanged. Collective: every rank calls it.
    """
    import torch.distributed as dist

    from trainium_trainer.llama.hf_export import save_model

    if os.environ.get("LOCAL_RANK", "0") == "0":
        model = base_model(config, seed, None)
        save_model({k: v.detach() for k, v in model.state_dict().items()}, config, folder)
        del model
    if dist.is_initialized():
        dist.barrier()
    return HFCheckpoint(folder)
