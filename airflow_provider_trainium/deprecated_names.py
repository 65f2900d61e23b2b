"""The classes' former names, still importable for one release from the module that defined each.

Every class a DAG imports is named ``Trainium<Role>``. A DAG file written against a former name keeps parsing,
with an ``AirflowProviderDeprecationWarning`` that names the new one; a trigger the triggerer stored under a former
classpath still loads. The former name is the class itself, so ``isinstance`` and subclasses hold either way. Each
module listed in ``RENAMED`` ends its module ``__getattr__`` in :func:`resolve`.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from airflow.exceptions import AirflowProviderDeprecationWarning

#: module -> {former name: the class's name now}
RENAMED: dict[str, dict[str, str]] = {
    "airflow_provider_trainium.operators.job": {"NeuronJobOperator": "TrainiumJobOperator"},
    "airflow_provider_trainium.operators.training": {"NeuronTrainingOperator": "TrainiumTrainingOperator"},
    "airflow_provider_trainium.operators.compile": {"NeuronCompileOperator": "TrainiumCompileOperator"},
    "airflow_provider_trainium.operators.image": {"NeuronImageBuildOperator": "TrainiumImageBuildOperator"},
    "airflow_provider_trainium.operators.registry": {
        "RegisterModelOperator": "TrainiumRegisterModelOperator",
        "PromoteModelAliasOperator": "TrainiumPromoteModelAliasOperator",
    },
    "airflow_provider_trainium.sensors.compile_cache": {"NeuronCompileCacheSensor": "TrainiumCompileCacheSensor"},
    "airflow_provider_trainium.sensors.registry": {"RegisteredModelSensor": "TrainiumRegisteredModelSensor"},
    "airflow_provider_trainium.triggers.registry": {"RegisteredModelTrigger": "TrainiumRegisteredModelTrigger"},
}


def resolve(module: str, name: str) -> Any:
    """The class of ``module`` formerly called ``name``, with a warning naming it as it is now; for any other
    name the ``AttributeError`` a module without a ``__getattr__`` would raise."""
    new = RENAMED.get(module, {}).get(name)
    if new is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    warnings.warn(
        f"{module}.{name} is deprecated and will be removed in the next release: use {module}.{new}",
        AirflowProviderDeprecationWarning,
        stacklevel=3,
    )
    return getattr(sys.modules[module], new)


def with_former_names(*names: str) -> tuple[str, ...]:
    """``names`` and the former names of each: a task instance recorded before a rename carries its class's name
    of the time as its ``operator``."""
    former = [old for renames in RENAMED.values() for old, new in renames.items() if new in names]
    return (*names, *former)
