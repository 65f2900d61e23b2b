"""Pure Trainium knowledge: instance catalog, job spec, launch command and environment.

Nothing here talks to AWS or imports an Airflow operator; every backend builds on it.

The names below are imported on first use: importing any ``neuron`` module runs this file first, and a DAG file
that reads one light module (``neuron.stack_names``) should not build the job spec's classes while it is parsed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_provider_trainium.neuron.catalog import CATALOG, InstanceType, get_instance_type
    from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

__all__ = ["CATALOG", "InstanceType", "JobSpec", "JobSpecError", "get_instance_type"]

_WHERE = {
    "CATALOG": "airflow_provider_trainium.neuron.catalog",
    "InstanceType": "airflow_provider_trainium.neuron.catalog",
    "get_instance_type": "airflow_provider_trainium.neuron.catalog",
    "JobSpec": "airflow_provider_trainium.neuron.spec",
    "JobSpecError": "airflow_provider_trainium.neuron.spec",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
