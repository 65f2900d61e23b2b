"""Choose and build the backend for a task: ``auto`` means local without a connection."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from airflow_provider_trainium.compute.base import ComputeBackend
from airflow_provider_trainium.hooks.trainium import TrainiumConfig

#: compute name -> "module:Class". Remote backends import their AWS hooks lazily.
BACKENDS: dict[str, str] = {
    "local": "airflow_provider_trainium.compute.local:LocalBackend",
    "ecs": "airflow_provider_trainium.compute.ecs:EcsBackend",
    "batch": "airflow_provider_trainium.compute.batch:BatchBackend",
}


def resolve_compute(compute: str, config: TrainiumConfig, nodes: int) -> str:
    compute = (compute or "auto").strip().lower()
    if compute == "auto":
        return config.default_compute(nodes)
    if compute not in BACKENDS:
        raise ValueError(f"compute {compute!r} is not one of: auto, {', '.join(BACKENDS)}")
    return compute


def local_state_dir() -> Path:
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "trainium-local"


def get_backend(compute: str, config: TrainiumConfig, **options: object) -> ComputeBackend:
    module_name, class_name = BACKENDS[compute].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name == module_name:
            raise ValueError(f"compute={compute!r} is not available in this version of the provider") from err
        raise
    backend_class = getattr(module, class_name)
    if compute == "local":
        return backend_class(local_state_dir(), **options)
    return backend_class(config, **options)
