"""The former class names still import, each as the class itself, with a warning that names the new one."""

from __future__ import annotations

import importlib

import pytest
from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.models.trigger import Trigger

from airflow_provider_trainium.deprecated_names import RENAMED, with_former_names

P = "airflow_provider_trainium"
#: (module, former name, name now): the names a DAG of the earlier release imports.
FORMER = [
    (f"{P}.operators.job", "NeuronJobOperator", "TrainiumJobOperator"),
    (f"{P}.operators.training", "NeuronTrainingOperator", "TrainiumTrainingOperator"),
    (f"{P}.operators.compile", "NeuronCompileOperator", "TrainiumCompileOperator"),
    (f"{P}.operators.image", "NeuronImageBuildOperator", "TrainiumImageBuildOperator"),
    (f"{P}.operators.registry", "RegisterModelOperator", "TrainiumRegisterModelOperator"),
    (f"{P}.operators.registry", "PromoteModelAliasOperator", "TrainiumPromoteModelAliasOperator"),
    (f"{P}.sensors.compile_cache", "NeuronCompileCacheSensor", "TrainiumCompileCacheSensor"),
    (f"{P}.sensors.registry", "RegisteredModelSensor", "TrainiumRegisteredModelSensor"),
    (f"{P}.triggers.registry", "RegisteredModelTrigger", "TrainiumRegisteredModelTrigger"),
]


@pytest.mark.parametrize(("module", "old", "new"), FORMER, ids=[old for _, old, _ in FORMER])
def test_a_former_name_warns_and_is_the_class_itself(module, old, new):
    imported = importlib.import_module(module)
    with pytest.warns(AirflowProviderDeprecationWarning, match=rf"{module}\.{old} is deprecated.*{module}\.{new}"):
        cls = getattr(imported, old)
    assert cls is getattr(imported, new) and cls.__name__ == new


def test_every_former_name_is_listed_here():
    assert {(m, old, new) for m, renames in RENAMED.items() for old, new in renames.items()} == set(FORMER)


def test_a_name_that_never_was_is_still_missing():
    imported = importlib.import_module(f"{P}.operators.job")
    with pytest.raises(AttributeError, match="has no attribute 'NeuronJobOperatr'"):
        _ = imported.NeuronJobOperatr
    assert not hasattr(imported, "RegisterModelOperator")  # the former name of another module's class


def test_a_trigger_row_stored_under_the_former_classpath_rebuilds_the_trigger():
    """A task deferred before the rename resumes: the triggerer imports the row's classpath."""
    from airflow_provider_trainium.triggers.registry import TrainiumRegisteredModelTrigger

    row = Trigger(
        classpath=f"{P}.triggers.registry.RegisteredModelTrigger",
        kwargs={"model_name": "m", "artifact_root": "s3://bucket/trainium", "alias": "production"},
    )
    module, _, name = row.classpath.rpartition(".")
    with pytest.warns(AirflowProviderDeprecationWarning):
        cls = getattr(importlib.import_module(module), name)
    trigger = cls(**Trigger._decrypt_kwargs(row.encrypted_kwargs))
    assert type(trigger) is TrainiumRegisteredModelTrigger
    assert trigger.serialize()[0] == f"{P}.triggers.registry.TrainiumRegisteredModelTrigger"


def test_the_view_matches_task_instances_recorded_under_a_former_name():
    assert with_former_names("TrainiumTrainingOperator") == ("TrainiumTrainingOperator", "NeuronTrainingOperator")
