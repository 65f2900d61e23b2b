"""The table of compute backends, as ``compute/`` and the code that runs jobs name it.

The table itself lives in :mod:`airflow_provider_trainium.backend_table`, outside this package, so a DAG file
reads the ``compute`` choices and the operators' links without importing ``compute/``; these are its names, the
same objects (registering a backend through either module registers it in the one table).
"""

from __future__ import annotations

from airflow_provider_trainium.backend_table import (
    AUTO,
    AutoRule,
    BackendEntry,
    all_links,
    auto_compute,
    backend_class,
    backend_links,
    backends,
    build_backend,
    compute_choices,
    compute_description,
    register_backend,
    resolve_compute,
    unregister_backend,
)

__all__ = [
    "AUTO",
    "AutoRule",
    "BackendEntry",
    "all_links",
    "auto_compute",
    "backend_class",
    "backend_links",
    "backends",
    "build_backend",
    "compute_choices",
    "compute_description",
    "register_backend",
    "resolve_compute",
    "unregister_backend",
]
