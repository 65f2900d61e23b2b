"""Every trigger survives the round trip the triggerer makes: serialize(), the stored row, the rebuilt trigger.

A trigger's kwargs are all a triggerer has to rebuild a deferred task's trigger after it restarts; an
argument that ``serialize()`` drops is silently lost (for Batch: ``num_nodes`` and ``log_group`` would lose
every node's logs but the first). A job trigger stores its watch loop (``{"watch": <the loop's arguments>}``);
each case gives every field of the loop a value other than its default, so a dropped one shows up as a
changed value. Rows stored before triggers serialized their loop hold the same fields as flat kwargs: those
must still rebuild the trigger, and the loop they describe.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from typing import Any

import pytest
from airflow.models.trigger import Trigger
from airflow.serialization.serialized_objects import BaseSerialization
from airflow.triggers.base import BaseTrigger

from airflow_provider_trainium.get_provider_info import get_provider_info
from airflow_provider_trainium.triggers.base import JobWatchTrigger
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger
from airflow_provider_trainium.triggers.registry import TrainiumRegisteredModelTrigger

BUDGET = {"max_cost_usd": 120.5, "cost_per_hour_usd": 21.5}

#: Every field of each job trigger's watch loop, none at its default.
WATCHES: dict[type[JobWatchTrigger], dict[str, Any]] = {
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
        "tail_in_worker": True,
    },
    TrainiumEcsTaskTrigger: {
        "handle": {
            "backend": "ecs",
            "job_id": "arn:aws:ecs:us-west-2:123456789012:task/trainium/abc",
            "job_name": "train-abc",
            "details": {"cluster": "trainium", "log_group": "/trainium/jobs", "log_stream": "trainium_trainer/abc"},
        },
        "deadline": 1_900_000_000.5,
        "aws_conn_id": "aws_trn",
        "region_name": "us-west-2",
        "poll_interval": 12.0,
        "placement_timeout": 600.0,
        "log_cursor_uri": "s3://bucket/runs/1/.trainium/log-cursor-abc.json",
        "budget": BUDGET,
        "tail_in_worker": True,
    },
}
#: Triggers that are not a watch loop's shell: every constructor argument, none at its default.
OTHERS: dict[type[BaseTrigger], dict[str, Any]] = {
    TrainiumRegisteredModelTrigger: {
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


def watch_fields(cls: type[JobWatchTrigger]) -> dict[str, Any]:
    """The loop's init fields and their defaults (``dataclasses.MISSING`` for a required one)."""
    return {f.name: f.default for f in dataclasses.fields(cls.watch_class) if f.init}


def through_trigger_row(classpath: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What Airflow 3.3 stores for a deferred task (``Trigger.from_object``) and what the triggerer reads back."""
    row = Trigger(classpath=classpath, kwargs=kwargs)
    return row.classpath, Trigger._decrypt_kwargs(row.encrypted_kwargs)


def through_base_serialization(classpath: str, kwargs: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The older encoding a triggerer still falls back to for rows written by earlier Airflow releases."""
    return classpath, BaseSerialization.deserialize(BaseSerialization.serialize(kwargs))


#: Both ways a stored trigger row is read back.
each_store = pytest.mark.parametrize("store", [through_trigger_row, through_base_serialization])
each_watch_trigger = pytest.mark.parametrize("cls", list(WATCHES), ids=lambda c: c.__name__)


def assert_no_default(given: dict[str, Any], defaults: dict[str, Any], every: str) -> None:
    """A case names every field (``every`` says which, if not) and none at its default: a dropped field shows."""
    assert set(given) == set(defaults), every
    for name, default in defaults.items():
        assert given[name] != default, f"{name}: use a value other than the default, or a drop goes unseen"


def rebuild(classpath: str, kwargs: dict[str, Any]) -> BaseTrigger:
    module, _, name = classpath.rpartition(".")
    return getattr(importlib.import_module(module), name)(**kwargs)


def classpath_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@each_store
@each_watch_trigger
def test_every_watch_field_survives_the_round_trip(cls, store):
    given = WATCHES[cls]
    assert_no_default(given, watch_fields(cls), "the case must give every field of the watch loop")

    classpath, kwargs = cls(watch=given).serialize()
    assert (classpath, kwargs) == (classpath_of(cls), {"watch": given})
    again = rebuild(*store(classpath, kwargs))

    assert type(again) is cls and again.serialize() == (classpath, kwargs)
    assert type(again.watch()) is cls.watch_class
    for name, value in given.items():
        assert getattr(again.watch(), name) == value, f"{name} did not survive the round trip"


@each_store
@each_watch_trigger
def test_a_row_stored_with_the_fields_as_kwargs_resumes_the_same_watch(cls, store):
    """Before triggers serialized their loop, a row held the loop's fields as the trigger's own kwargs."""
    old_row = WATCHES[cls]
    again = rebuild(*store(classpath_of(cls), old_row))
    assert type(again) is cls
    assert again.serialize() == (classpath_of(cls), {"watch": old_row})  # stored again in the new form


def test_the_two_forms_do_not_mix():
    with pytest.raises(TypeError, match="not both"):
        TrainiumEcsTaskTrigger(watch=WATCHES[TrainiumEcsTaskTrigger], budget=None)


def test_a_watch_field_reads_through_the_trigger():
    trigger = TrainiumBatchJobTrigger(watch=WATCHES[TrainiumBatchJobTrigger])
    assert trigger.handle["job_id"] == "4c7a2d1e" and trigger.num_nodes == 4
    with pytest.raises(AttributeError):
        _ = trigger._budget  # the loop's own state is not a field


@each_store
@pytest.mark.parametrize("cls", list(OTHERS), ids=lambda c: c.__name__)
def test_every_constructor_argument_survives_the_round_trip(cls, store):
    given = OTHERS[cls]
    defaults = {name: param.default for name, param in parameters(cls).items()}
    assert_no_default(given, defaults, "the case must pass every constructor argument")

    classpath, kwargs = cls(**given).serialize()
    assert set(kwargs) == set(given), f"serialize() drops {set(given) - set(kwargs)}"
    again = rebuild(*store(classpath, kwargs))

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
    assert found == set(WATCHES) | set(OTHERS)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("airflow_provider_trainium.triggers.batch.BatchJobTrigger", TrainiumBatchJobTrigger),
        ("airflow_provider_trainium.triggers.ecs.EcsTaskTrigger", TrainiumEcsTaskTrigger),
    ],
)
@pytest.mark.parametrize("form", ["fields as kwargs", "watch"])
def test_tasks_deferred_under_the_old_names_resume(old, new, form):
    """A running deployment stored the old classpath in its trigger rows; the triggerer must still build it."""
    kwargs = WATCHES[new] if form == "fields as kwargs" else {"watch": WATCHES[new]}
    again = rebuild(*through_trigger_row(old, kwargs))
    assert type(again) is new and again.serialize()[1] == {"watch": WATCHES[new]}
