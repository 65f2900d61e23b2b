"""Checkpoints at a URI: written whole before they are pointed at, and loaded without running any code.

Layout: ``<uri>/step-<N:08d>.pt`` and ``<uri>/latest.json`` (``{"step": N, "file": "step-<N>.pt", "sha256": ...}``),
keeping the last K. Whoever can write the checkpoint URI must not be able to run code in the trainer, so:

- ``torch.load(weights_only=True)``: tensors, numbers, strings and containers only, never arbitrary pickles.
  RNG states are stored as ints, lists and tensors (:func:`rng_state`).
- ``latest.json``'s ``file`` must be exactly ``step-<8 digits>.pt`` for its ``step``: no path separators, no
  ``..``, nothing outside the checkpoint URI.
- The file's sha256 is recorded in ``latest.json`` and checked before the bytes are unpickled.
Any violation fails the job with :class:`CheckpointError` (bad input: a retry would read the same files).
"""

from __future__ import annotations

import hashlib
import io
import logging
import pickle
import random
import re
from typing import Any

import numpy as np
import torch

from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError

log = logging.getLogger("trainer")
POINTER = "latest.json"
FILE_PATTERN = re.compile(r"step-(\d{8})\.pt")
SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")


class CheckpointError(BadInputError):
    """A checkpoint or its pointer is malformed, tampered with or holds more than plain data."""


def checkpoint_name(step: int) -> str:
    return f"step-{step:08d}.pt"


def save_checkpoint(checkpoint_uri: str, step: int, state: dict[str, Any], keep_last: int = 2) -> str:
    """Write ``state`` (already on the host) for ``step``, then move ``latest.json`` to it."""
    name = checkpoint_name(step)
    buffer = io.BytesIO()
    torch.save(state, buffer)
    data = buffer.getvalue()
    uris.write_bytes(uris.join(checkpoint_uri, name), data)
    pointer = {"step": step, "file": name, "sha256": hashlib.sha256(data).hexdigest()}
    uris.write_json(uris.join(checkpoint_uri, POINTER), pointer)
    olds = [n for n in uris.list_names(checkpoint_uri) if FILE_PATTERN.fullmatch(n)]
    for stale in sorted(olds)[:-keep_last] if keep_last > 0 else []:
        uris.remove(uris.join(checkpoint_uri, stale))
    log.info("checkpoint step %d -> %s", step, uris.join(checkpoint_uri, name))
    return name


def pointer_json(pointer_uri: str) -> dict[str, Any] | None:
    """The JSON object of a ``latest.json`` (this layout's or the native stack's), ``None`` when there is none yet;
    anything else is a :class:`CheckpointError` (bad input: a retry would read the same file)."""
    if not uris.exists(pointer_uri):
        return None
    try:
        pointer = uris.read_json(pointer_uri)
    except ValueError as err:
        raise CheckpointError(f"{pointer_uri} is not valid JSON ({err})") from err
    if not isinstance(pointer, dict):
        raise CheckpointError(f"{pointer_uri} must hold a JSON object, got {type(pointer).__name__}")
    return pointer


def read_pointer(checkpoint_uri: str) -> dict[str, Any] | None:
    """``latest.json``, checked to name one checkpoint file of this directory by its step; ``None`` if absent."""
    pointer_uri = uris.join(checkpoint_uri, POINTER)
    pointer = pointer_json(pointer_uri)
    if pointer is None:
        return None
    step, name, digest = pointer.get("step"), pointer.get("file"), pointer.get("sha256")
    if not isinstance(step, int) or isinstance(step, bool) or step < 0:
        raise CheckpointError(f"{pointer_uri}: 'step' must be a non-negative integer, got {step!r}")
    if not isinstance(name, str) or not FILE_PATTERN.fullmatch(name) or name != checkpoint_name(step):
        raise CheckpointError(
            f"{pointer_uri}: 'file' must be {checkpoint_name(step)!r} (step-<8 digits>.pt in this directory), "
            f"got {name!r}"
        )
    if not isinstance(digest, str) or not SHA256_PATTERN.fullmatch(digest):
        raise CheckpointError(
            f"{pointer_uri}: 'sha256' must be 64 lowercase hex digits, got {digest!r} "
            "(a pointer written before checksums were recorded: remove the checkpoint directory to start over)"
        )
    return pointer


def load_latest_checkpoint(checkpoint_uri: str | None) -> dict[str, Any] | None:
    """The newest complete checkpoint, or ``None`` when there is none yet."""
    if not checkpoint_uri:
        return None
    pointer = read_pointer(checkpoint_uri)
    if pointer is None:
        return None
    file_uri = uris.join(checkpoint_uri, pointer["file"])
    try:
        data = uris.read_bytes(file_uri)
    except FileNotFoundError as err:
        raise CheckpointError(f"{POINTER} points at {file_uri}, which does not exist") from err
    actual = hashlib.sha256(data).hexdigest()
    if actual != pointer["sha256"]:
        raise CheckpointError(
            f"{file_uri} has sha256 {actual}, but {POINTER} records {pointer['sha256']}: "
            "the checkpoint was modified after it was written; refusing to load it"
        )
    try:
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError) as err:
        raise CheckpointError(
            f"{file_uri} holds more than tensors and plain data; refusing to load it ({err})"
        ) from err
    if not isinstance(state, dict):
        raise CheckpointError(f"{file_uri} must hold a dict, got {type(state).__name__}")
    log.info("resuming from checkpoint step %d", pointer["step"])
    return state


def rng_state(xla: bool = False) -> dict[str, Any]:
    """Python, numpy, torch (and XLA) RNG states as ints, lists and tensors, which ``weights_only`` loads."""
    version, internal, gauss = random.getstate()
    numpy_state = np.random.get_state()
    assert isinstance(numpy_state, tuple)  # legacy=True (the default) gives the tuple form, not the dict
    kind, keys, pos, has_gauss, cached = numpy_state
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
    }
    if xla:
        import torch_xla.core.xla_model as xm

        state["xla"] = int(xm.get_rng_state())
    return state


def set_rng_state(state: dict[str, Any], xla: bool = False) -> None:
    version, internal, gauss = state["python"]
    random.setstate((int(version), tuple(int(v) for v in internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), int(pos), int(has_gauss), float(cached)))
    torch.set_rng_state(state["torch"])
    if xla and "xla" in state:
        import torch_xla.core.xla_model as xm

        xm.set_rng_state(int(state["xla"]))
