"""Defaults every operator and sensor of the provider takes from Airflow's configuration, as the amazon ones do.

A module of its own so a sensor (imported when a DAG file is parsed) reads it without importing the job operator.
"""

from __future__ import annotations


def default_deferrable() -> bool:
    """Airflow's ``[operators] default_deferrable`` (False unless the deployment sets it)."""
    from airflow.providers.common.compat.sdk import conf

    return conf.getboolean("operators", "default_deferrable", fallback=False)
