"""Reading a Hugging Face model directory (``config.json`` + ``*.safetensors`` shards + their index).

The directory may be ``file://``, a plain path or ``s3://``. Tensors are read with safetensors, one shard
file at a time and each tensor once; a caller that holds only part of a tensor (a tensor-parallel rank)
asks for that part and only those bytes are read (``safe_open(...).get_slice``). Remote shards are copied
once per node into a local cache first: safetensors memory-maps local files.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch

from trainium_trainer import boundary
from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"
#: ``rope_type`` values whose frequencies are fixed when the model is built; ``dynamic`` recomputes them
#: from each batch's length (a data-dependent branch that recompiles XLA graphs), the others are untested.
SUPPORTED_ROPE = ("default", "linear", "llama3")


@dataclass(frozen=True)
class Part:
    """One rank's share of a tensor: piece ``index`` of ``count`` equal pieces along ``dim``."""

    dim: int
    index: int
    count: int


def validate_config(raw: dict[str, Any], where: str) -> None:
    """Refuse, in one message, what the trainer's Llama cannot represent faithfully."""
    problems = []
    model_type = raw.get("model_type")
    if model_type != "llama":
        problems.append(f"model_type {model_type!r} is not supported (only 'llama', LlamaForCausalLM)")
    archs = raw.get("architectures") or ["LlamaForCausalLM"]
    if "LlamaForCausalLM" not in archs:
        problems.append(f"architectures {archs} do not include LlamaForCausalLM")
    rope = raw.get("rope_scaling") or raw.get("rope_parameters") or {}
    rope_type = rope.get("rope_type") or rope.get("type") or "default"
    if rope_type not in SUPPORTED_ROPE:
        problems.append(f"rope scaling {rope_type!r} is not supported (supported: {', '.join(SUPPORTED_ROPE)})")
    for flag in ("attention_bias", "mlp_bias"):
        if raw.get(flag):
            problems.append(f"{flag}=true is not supported (the tensor-parallel projections carry no bias)")
    if raw.get("quantization_config"):
        problems.append("quantized checkpoints are not supported (quantization_config is set)")
    if problems:
        raise BadInputError(f"base model {where}: " + "; ".join(problems))


def safetensors_keys(header: bytes) -> list[str]:
    return [k for k in json.loads(header) if k != "__metadata__"]


class HFCheckpoint:
    """A Hugging Face model directory at ``uri``; nothing is read until asked."""

    def __init__(self, uri: str, cache_dir: str | None = None) -> None:
        self.uri = uri.rstrip("/")
        self.cache_dir = (
            cache_dir
            or os.environ.get(boundary.ENV_WEIGHTS_CACHE)
            or os.path.join(tempfile.gettempdir(), "trainium-weights")
        )

    @cached_property
    def raw_config(self) -> dict[str, Any]:
        config_uri = uris.join(self.uri, CONFIG)
        if not uris.exists(config_uri):
            raise BadInputError(f"base model {self.uri} has no {CONFIG}")
        try:
            raw: dict[str, Any] = json.loads(uris.read_bytes(config_uri))
        except ValueError as err:
            raise BadInputError(f"base model {self.uri}: {CONFIG} is not valid JSON: {err}") from err
        validate_config(raw, self.uri)
        return raw

    def config(self) -> Any:
        """transformers' ``LlamaConfig`` of the checkpoint (validated first)."""
        from transformers import LlamaConfig

        return LlamaConfig.from_dict(dict(self.raw_config))

    @cached_property
    def weight_map(self) -> dict[str, str]:
        """Tensor name -> shard file, from the index, or from the single file's header."""
        index_uri = uris.join(self.uri, INDEX)
        if uris.exists(index_uri):
            try:
                weight_map = dict(uris.read_json(index_uri)["weight_map"])
            except (ValueError, KeyError, TypeError) as err:
                raise BadInputError(f"base model {self.uri}: {INDEX} has no usable weight_map ({err})") from err
            missing = sorted(f for f in set(weight_map.values()) if not uris.exists(uris.join(self.uri, f)))
            if missing:
                raise BadInputError(f"base model {self.uri}: shards listed in {INDEX} are missing: {missing[:5]}")
            return weight_map
        single = uris.join(self.uri, WEIGHTS)
        if not uris.exists(single):
            raise BadInputError(f"base model {self.uri} has neither {INDEX} nor {WEIGHTS}")
        return dict.fromkeys(safetensors_keys(self._header(single)), WEIGHTS)

    @staticmethod
    def _header(file_uri: str) -> bytes:
        """The JSON header of a safetensors file: two small range reads, not the whole file."""
        fs, path = uris.filesystem(file_uri)
        with fs.open(path, "rb") as fh:
            (length,) = struct.unpack("<Q", fh.read(8))
            header: bytes = fh.read(length)
            return header

    def local_file(self, name: str) -> str:
        """A local path for one file of the directory: the file itself, or a node-local cached copy.

        Ranks of one node share the copy: the first downloads under a lock, the others wait and reuse
        it. A cached copy is reused only while the remote object is unchanged (same size and ETag).
        """
        file_uri = uris.join(self.uri, name)
        local = uris.local_path(file_uri)
        if local is not None:
            return local
        fs, path = uris.filesystem(file_uri)
        folder = os.path.join(self.cache_dir, hashlib.sha256(self.uri.encode()).hexdigest()[:16])
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, name.replace("/", "__"))
        with open(f"{target}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            info = fs.info(path)
            ukey = f"{info.get('size')}/{info.get('ETag') or info.get('etag') or info.get('mtime')}"
            meta = f"{target}.json"
            if os.path.exists(target) and os.path.exists(meta):
                with open(meta) as fh:
                    if json.load(fh).get("ukey") == ukey:
                        return target
            part = f"{target}.part-{os.getpid()}"
            with fs.open(path, "rb") as src, open(part, "wb") as dst:
                size, digest = boundary.sha256_read(src, dst.write)
            os.replace(part, target)
            with open(meta, "w") as fh:
                json.dump({"ukey": ukey, "sha256": digest, "size": size}, fh)
        return target

    def read(self, names: Iterable[str], part_of: Callable[[str], Part | None]) -> Iterator[tuple[str, torch.Tensor]]:
        """Yield ``(name, tensor)`` for ``names``, shard file by shard file: each file opened once, each
        tensor read once, and for a name with a :class:`Part` only that part's bytes."""
        import safetensors

        by_file: dict[str, list[str]] = {}
        for name in names:
            by_file.setdefault(self.weight_map[name], []).append(name)
        for file in sorted(by_file):
            with safetensors.safe_open(self.local_file(file), framework="pt") as shard:
                for name in by_file[file]:
                    part = part_of(name)
                    if part is None:
                        yield name, shard.get_tensor(name)
                        continue
                    piece = shard.get_slice(name)
                    shape = piece.get_shape()
                    if shape[part.dim] % part.count:
                        raise BadInputError(
                            f"base model {self.uri}: {name} has {shape[part.dim]} rows along dim {part.dim}, "
                            f"not divisible by {part.count} tensor-parallel ranks"
                        )
                    size = shape[part.dim] // part.count
                    index = [slice(None)] * len(shape)
                    index[part.dim] = slice(part.index * size, (part.index + 1) * size)
                    yield name, piece[tuple(index)]

    def fingerprint(self) -> dict[str, Any]:
        """Content identity of the whole directory: sha256 over (path, size, sha256) of every file,
        the registry's own fingerprint rule, so a registered base is recognised by its manifest."""
        fs, root = uris.filesystem(self.uri)
        root = root.rstrip("/")
        lines = []
        for path in sorted(fs.find(root)):
            rel = path[len(root) :].lstrip("/")
            size, sha = self._file_hash(rel)
            lines.append(f"{rel}\0{size}\0{sha}\n")
        digest = hashlib.sha256("".join(lines).encode())
        return {"uri": self.uri, "fingerprint": digest.hexdigest(), "files": len(lines)}

    def _file_hash(self, rel: str) -> tuple[int, str]:
        if rel.endswith(".safetensors") and uris.local_path(self.uri) is None:
            target = self.local_file(rel)  # hashed while it was downloaded: no second read
            with open(f"{target}.json") as fh:
                meta = json.load(fh)
            return int(meta["size"]), str(meta["sha256"])
        fs, path = uris.filesystem(uris.join(self.uri, rel))
        with fs.open(path, "rb") as fh:
            return boundary.sha256_read(fh)
