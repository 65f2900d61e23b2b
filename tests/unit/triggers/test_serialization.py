"""Every trigger survives the round trip the triggerer makes: serialize(), the stored row, the rebuilt trigger.

A trigger's kwargs are all a triggerer has to rebuild a deferred task's trigger after it restarts; an
argument that ``serialize()`` drops is silently lost (for Batch: ``num_nodes`` and ``log_group`` would lose
every node's logs but the first). Each case passes every constructor argument with a value other than its
default, so a dropped one shows up as a changed value.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import pytest
from airflow.models.trigger import Trigger
from airflow.serialization.serialized_objects import BaseSerialization
from airflow.triggers.base import BaseTrigger

from airflow_provider_trainium.get_provider_info import get_provider_info
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger
from airflow_provider_trainium.triggers.registry import RegisteredModelTrigger

BUDGET = {"max_cost_usd": 120.5, "cost_per_hour_usd": 21.5}

CASES: dict[type[BaseTrigger], dict[str, Any]] = {
    TrainiumBatchJobTrigger: {
        "handle": {"backend": "batch", "job_id": "4c7a2d1e", "job_name": "train-abc", "details": {"num_nodes": 4}},
        "deadline": 1_900_000_000.5,
        "aws_conn_id": "aws_trn",
        "region_name": "us-west-2",
        "num_nodes": 4,
        "log_group": "/trainium/jobs",
        "poll_interval": 12.0,
        "log_interval": 7.0,
        "stream_logs": False,
        "log_cursor_uri": "s3://bucket/runs/1/.trainium/log-cursor-4c7a2d1e.json",
        "budget": BUDGET,
    },
    TrainiumEcsTaskTrigger: {
        "handle": {
            "backend": "ecs",
            "job_id": "arn:aws:ecs:us-west-2:123456789012:task/trainium/abc",
            "job_name": "train-abc",
            "details": {"cluster": "trainium", "log_group": "/trainium/jobs", "log_stream": "trainer/abc"},
        },
        "deadline": 1_900_000_000.5,
        "aws_conn_id": "aws_trn",
        "region_name": "us-west-2",
        "poll_interval": 12.0,
        "placement_timeout": 600.0,
        "log_cursor_uri": "s3://bucket/runs/1/.trainium/log-cursor-abc.json",
        "budget": BUDGET,
    },
    RegisteredModelTrigger: {
        "model_name": "mnist-mlp",
        "artifact_root": "s3://bucket/trainium",
        "conn_id": "aws_trn",
        "version": 3,
        "alias": "production",
        "newer_than": 2,
        "poke_interval": 5.0,
    },
}


def parameters(cls: type) -> dict[str, inspect.Parameter]:
    return {n: p for n, p in inspect.signature(cls.__init__).parameters.items() if n != "self"}


def through_trigger_row(classpath: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What Airflow 3.3 stores for a deferred task (``Trigger.from_object``) and what the triggerer reads back."""
    row = Trigger(classpath=classpath, kwargs=kwargs)
    return row.classpath, Trigger._decrypt_kwargs(row.encrypted_kwargs)


def through_base_serialization(classpath: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The older encoding a triggerer still falls back to for rows written by earlier Airflow releases."""
    return classpath, BaseSerialization.deserialize(BaseSerialization.serialize(kwargs))


def rebuild(classpath: str, kwargs: dict[str, Any]) -> BaseTrigger:
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


@pytest.mark.parametrize("store", [through_trigger_row, through_base_serialization])
@pytest.mark.parametrize("cls", list(CASES), ids=lambda c: c.__name__)
def test_every_constructor_argument_survives_the_round_trip(cls, store):
    given = CASES[cls]
    assert set(given) == set(parameters(cls)), "the case must pass every constructor argument"
    for name, param in parameters(cls).items():
        assert given[name] != param.default, f"{name}: use a value other than the default, or a drop goes unseen"

    classpath, kwargs = cls(**given).serialize()
    assert set(kwargs) == set(given), f"serialize() drops {set(given) - set(kwargs)}"
    stored_path, stored = store(classpath, kwargs)
    again = rebuild(stored_path, stored)

    assert type(again) is cls
    assert again.serialize() == (classpath, kwargs)
    for name, value in given.items():
        assert again.serialize()[1][name] == value, f"{name} did not survive the round trip"


def test_every_trigger_of_the_provider_has_a_case():
    modules = [m for group in get_provider_info()["triggers"] for m in group["python-modules"]]
    found = {
        obj
        for module in modules
        for obj in vars(importlib.import_module(module)).values()
        if inspect.isclass(obj) and issubclass(obj, BaseTrigger) and obj.__module__ == module
    }
    assert found == set(CASES)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("airflow_provider_trainium.triggers.batch.BatchJobTrigger", TrainiumBatchJobTrigger),
        ("airflow_provider_trainium.triggers.ecs.EcsTaskTrigger", TrainiumEcsTaskTrigger),
    ],
)
def test_tasks_deferred_under_the_old_names_resume(old, new):
    """A running deployment stored the old classpath in its trigger rows; the triggerer must still build it."""
    given = CASES[new]
    classpath, kwargs = through_trigger_row(old, new(**given).serialize()[1])
    assert type(rebuild(classpath, kwargs)) is new
