"""Sharded checkpoints with ``torch.distributed.checkpoint`` (DCP): each rank writes its own shards.

Layout: ``<uri>/step-<N:08d>/`` is one DCP checkpoint (``.metadata`` plus ``__<rank>_0.distcp`` per rank),
and ``<uri>/latest.json`` (``{"step": N, "dir": "step-<N:08d>"}``) is moved there by rank 0 only after every
rank's shards and the metadata are written (``dcp.save`` ends in a collective). The last K are kept.

The state: model and optimizer through ``get_state_dict`` / ``set_state_dict`` (sharded DTensors; DCP
reshards on load), and the step and scheduler position as tensors. DCP unpickles ``.metadata`` with plain
``pickle`` and reads non-tensor entries (the optimizer's hyperparameters) with
``torch.load(weights_only=False)``; whoever can write the checkpoint URI must not run code in the trainer,
so the reader unpickles the metadata with an allow-list of DCP's own metadata classes and
:class:`PlainDataPlanner` loads non-tensor entries with ``weights_only=True`` (plain data only).
``file://`` and plain paths go through DCP's ``FileSystemWriter``; other schemes (``s3://``) through its
fsspec writer, on the same fsspec the rest of the trainer uses (``trainium_trainer.common.uri``).
"""

from __future__ import annotations

import io
import logging
import pickle
import re
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint import state_dict_loader, state_dict_saver
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint.planner import ReadItem
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

from trainium_trainer.common import uri as uris
from trainium_trainer.common.checkpoint import CheckpointError, pointer_json

if TYPE_CHECKING:
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

log = logging.getLogger("trainer")
POINTER = "latest.json"
DIR_PATTERN = re.compile(r"step-(\d{8})")
#: What DCP's metadata may hold: its own dataclasses, torch sizes and dtypes, and builtins.
_ALLOWED = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in ("Metadata", "TensorStorageMetadata", "BytesStorageMetadata", "ChunkStorageMetadata",
                 "TensorProperties", "StorageMeta", "MetadataIndex", "_MEM_FORMAT_ENCODING")  # fmt: skip
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.distributed.checkpoint.planner", "WriteItemType"),
    ("torch", "Size"),
    ("torch.serialization", "_get_layout"),  # looks a layout up by name (torch.strided)
    ("pathlib", "PosixPath"),  # the checkpoint id DCP records
    ("torch", "float32"), ("torch", "bfloat16"), ("torch", "float16"), ("torch", "float64"),
    ("torch", "int64"), ("torch", "int32"), ("torch", "uint8"), ("torch", "bool"),
    ("torch", "strided"), ("torch", "contiguous_format"), ("torch", "preserve_format"),
    ("collections", "OrderedDict"), ("builtins", "set"), ("builtins", "frozenset"),
}  # fmt: skip


def checkpoint_dir(step: int) -> str:
    return f"step-{step:08d}"


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise CheckpointError(f"checkpoint metadata refers to {module}.{name}, which DCP metadata never holds")
        return super().find_class(module, name)


def read_metadata(data: bytes) -> dcp_metadata.Metadata:
    """DCP metadata from its bytes, through the allow-list."""
    try:
        metadata = _MetadataUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, AttributeError) as err:
        raise CheckpointError(f"checkpoint metadata is not DCP metadata ({err})") from err
    if not isinstance(metadata, dcp_metadata.Metadata):
        raise CheckpointError(f"checkpoint metadata is a {type(metadata).__name__}, not DCP Metadata")
    if getattr(metadata, "storage_meta", None) is None:
        metadata.storage_meta = dcp_metadata.StorageMeta()
    return metadata


class PlainDataPlanner(DefaultLoadPlanner):
    """DCP's load planner, but a non-tensor entry is unpickled as plain data only (``weights_only=True``)."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        try:
            loaded = torch.load(value, weights_only=True)
        except (pickle.UnpicklingError, RuntimeError) as err:
            raise CheckpointError(f"checkpoint entry {read_item.dest_index.fqn!r} is more than plain data") from err
        target = self.mappings[read_item.dest_index.fqn] if self.flatten_state_dict else None
        if target is not None:
            from torch.distributed.checkpoint._traverse import set_element

            set_element(self.original_state_dict, target, loaded)
        else:
            self.state_dict[read_item.dest_index.fqn] = loaded


def writer(uri: str) -> Any:
    path = uris.local_path(uri)
    if path is not None:
        return FileSystemWriter(path)
    from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter

    return FsspecWriter(uri)


def reader(uri: str) -> Any:
    """DCP's reader for ``uri`` with its metadata read through :func:`read_metadata`, here and now: DCP
    swallows a reader's exception, so a refusal raised inside ``dcp.load`` would lose its message."""
    checked = read_metadata(uris.read_bytes(uris.join(uri, ".metadata")))
    assert checked.storage_meta is not None  # read_metadata sets one where the file has none
    storage_meta: dcp_metadata.StorageMeta = checked.storage_meta
    base: type[FileSystemReader] | type[FsspecReader]
    path = uris.local_path(uri)
    if path is not None:
        base = FileSystemReader
    else:
        from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader

        base, path = FsspecReader, uri

    class TrustedReader(base):  # type: ignore[valid-type, misc]  # a base picked at run time (local or fsspec)
        def read_metadata(self, *args: Any, **kwargs: Any) -> dcp_metadata.Metadata:
            storage_meta.load_id = self.load_id
            return checked

    return TrustedReader(path)


def read_state(state: dict[str, Any], uri: str) -> None:
    """``dcp.load`` into ``state`` from the checkpoint at ``uri``; a refusal raises as itself, not wrapped
    in DCP's per-rank ``CheckpointException``."""
    try:
        state_dict_loader.load(state, storage_reader=reader(uri), planner=PlainDataPlanner())
    except CheckpointException as err:
        for exc, _trace in err.failures.values():
            if isinstance(exc, CheckpointError):
                raise exc from err
        raise


def training_state(
    model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int, scheduler: Any
) -> dict[str, Any]:
    model_state, optim_state = get_state_dict(model, optimizer)
    position = {"step": torch.tensor(step), "scheduler_last_epoch": torch.tensor(scheduler.last_epoch)}
    return {"model": model_state, "optimizer": optim_state, "trainer": position}


def save(uri: str, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any,
         keep_last: int = 2) -> str:  # fmt: skip
    """Every rank writes its shards of ``step``; rank 0 then moves the pointer and drops old ones."""
    name = checkpoint_dir(step)
    state_dict_saver.save(
        training_state(model, optimizer, step, scheduler), storage_writer=writer(uris.join(uri, name))
    )
    dist.barrier()
    if dist.get_rank() == 0:
        uris.write_json(uris.join(uri, POINTER), {"step": step, "dir": name})
        olds = sorted(n for n in uris.list_names(uri) if DIR_PATTERN.fullmatch(n))
        for stale in olds[:-keep_last] if keep_last > 0 else []:
            uris.remove(uris.join(uri, stale), recursive=True)
        log.info("checkpoint step %d -> %s", step, uris.join(uri, name))
    dist.barrier()
    return name


def latest(uri: str | None) -> int | None:
    """The step ``latest.json`` points at (checked to name a directory of this URI), None without one."""
    if not uri:
        return None
    pointer_uri = uris.join(uri, POINTER)
    pointer = pointer_json(pointer_uri)
    if pointer is None:
        return None
    step = pointer.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0 or pointer.get("dir") != checkpoint_dir(step):
        raise CheckpointError(f"{pointer_uri} must be {{'step': N, 'dir': 'step-<N:08d>'}}, got {pointer!r}")
    return step


def load(uri: str, step: int, model: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> int:
    """Restore ``step``'s shards into the (already parallelized) model, optimizer and scheduler."""
    state = training_state(model, optimizer, 0, scheduler)
    read_state(state, uris.join(uri, checkpoint_dir(step)))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optimizer"])
    loaded = int(state["trainer"]["step"])
    if loaded != step:
        raise CheckpointError(f"{checkpoint_dir(step)} holds step {loaded}")
    scheduler.last_epoch = int(state["trainer"]["scheduler_last_epoch"])
    scheduler._last_lr = [group["lr"] for group in optimizer.param_groups]
    log.info("resumed from checkpoint step %d", step)
    return step
