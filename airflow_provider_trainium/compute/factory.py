"""Choose and build the backend for a task, from the one table in :mod:`compute.backends`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.compute.backends import build_backend, resolve_compute

if TYPE_CHECKING:
    from airflow_provider_trainium.compute.base import ComputeBackend
    from airflow_provider_trainium.hooks.trainium import TrainiumConfig

__all__ = ["get_backend", "local_state_dir", "resolve_compute"]


def local_state_dir() -> Path:
    """Where local compute keeps its job records: under ``$AIRFLOW_HOME`` so every worker of this host sees them."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "trainium-local"


def get_backend(compute: str, config: TrainiumConfig, **options: Any) -> ComputeBackend:
    """The backend named ``compute`` (already resolved, not ``auto``), built from the connection."""
    return build_backend(compute, config, options)
