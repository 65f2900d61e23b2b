"""Defaults every operator and sensor of the provider takes from Airflow's configuration, as the amazon ones do.

A module of its own so a sensor (imported when a DAG file is parsed) reads it without importing the job operator.
"""

from __future__ import annotations


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` (False unless the deployment sets it)."""
    from airflow.providers.common.compat.sdk import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)


def wait_options(
    poll_interval: float | None, log_interval: float | None, placement_timeout: float | None
) -> dict[str, float]:
    """The wait settings a task was given, as backend options (``build_backend``); an unset one keeps the
    backend's default."""
    given = {"poll_interval": poll_interval, "log_interval": log_interval, "placement_timeout": placement_timeout}
    return {name: float(value) for name, value in given.items() if value is not None}
