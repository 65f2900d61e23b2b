"""Checkpoints at a URI: written whole before they are pointed at, so a crash never leaves a bad latest.

Layout: ``<uri>/step-<N>.pt`` and ``<uri>/latest.json`` (``{"step": N, "file": ...}``), keeping the last K.
"""

from __future__ import annotations

import io
import logging
from typing import Any

import torch

from trainer.common import uri as uris

log = logging.getLogger("trainer")


def save_checkpoint(checkpoint_uri: str, step: int, state: dict[str, Any], keep_last: int = 2) -> str:
    """Write ``state`` (already on the host) for ``step``, then move ``latest.json`` to it."""
    name = f"step-{step:08d}.pt"
    buffer = io.BytesIO()
    torch.save(state, buffer)
    uris.write_bytes(uris.join(checkpoint_uri, name), buffer.getvalue())
    uris.write_json(uris.join(checkpoint_uri, "latest.json"), {"step": step, "file": name})
    olds = [n for n in uris.list_names(checkpoint_uri) if n.startswith("step-") and n.endswith(".pt")]
    for stale in sorted(olds)[:-keep_last] if keep_last > 0 else []:
        uris.remove(uris.join(checkpoint_uri, stale))
    log.info("checkpoint step %d -> %s", step, uris.join(checkpoint_uri, name))
    return name


def load_latest_checkpoint(checkpoint_uri: str | None) -> dict[str, Any] | None:
    """The newest complete checkpoint, or ``None`` when there is none yet."""
    if not checkpoint_uri:
        return None
    pointer = uris.join(checkpoint_uri, "latest.json")
    if not uris.exists(pointer):
        return None
    latest = uris.read_json(pointer)
    data = uris.read_bytes(uris.join(checkpoint_uri, latest["file"]))
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    log.info("resuming from checkpoint step %d", latest["step"])
    return state
