"""Where local compute keeps its job records; ``resolve_compute`` is :mod:`compute.backends`'s own."""

from __future__ import annotations

import os
from pathlib import Path

from airflow_provider_trainium.compute.backends import resolve_compute

__all__ = ["local_state_dir", "resolve_compute"]


def local_state_dir() -> Path:
    """Where local compute keeps its job records: under ``$AIRFLOW_HOME`` so every worker of this host sees them."""
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home) / "trainium-local"
