"""The amazon operators' conventions: every class a DAG imports is named ``Trainium<Role>``, ``deferrable`` defaults
to ``[operators] default_deferrable``, and the wait's intervals are operator arguments that reach the backend's watch
loop."""

from __future__ import annotations

import importlib
import inspect

import pytest
from airflow.sdk import BaseHook, BaseOperator
from airflow.triggers.base import BaseTrigger

from airflow_provider_trainium.get_provider_info import get_provider_info
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.sensors.job import TrainiumJobSensor
from airflow_provider_trainium.sensors.registry import TrainiumRegisteredModelSensor

CONFIG = TrainiumConfig(configured=True, region_name="us-east-1", artifact_root="s3://b/p", ecs_cluster="c",
                        subnets=("subnet-1",), log_group="/trainium/jobs")  # fmt: skip


def test_every_operator_sensor_hook_and_trigger_is_named_trainium_role():
    info = get_provider_info()
    modules = [
        m for kind in ("operators", "sensors", "hooks", "triggers") for g in info[kind] for m in g["python-modules"]
    ]
    names = {
        obj.__name__
        for module in modules
        for obj in vars(importlib.import_module(module)).values()
        if inspect.isclass(obj)
        and obj.__module__ == module
        and issubclass(obj, (BaseOperator, BaseHook, BaseTrigger))
        and not obj.__name__.startswith("_")
    }
    assert len(names) >= 15, names
    assert sorted(n for n in names if not n.startswith("Trainium")) == []


def job(**kwargs) -> TrainiumJobOperator:
    return TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.allreduce", **kwargs)


@pytest.mark.parametrize("setting", ["True", "False"])
def test_deferrable_follows_airflows_default_deferrable_unless_given(monkeypatch, setting):
    monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", setting)
    expected = setting == "True"
    assert job().deferrable is expected
    assert TrainiumJobSensor(task_id="w", job_task_id="train").deferrable is expected
    assert TrainiumRegisteredModelSensor(task_id="r", model_name="m").deferrable is expected
    assert job(deferrable=not expected).deferrable is (not expected)


def test_poll_and_log_intervals_and_the_placement_timeout_reach_the_watch_loops():
    op = job(poll_interval=5, log_interval=7, placement_timeout=600)
    op._config = CONFIG
    batch = op.backend_for("batch")
    assert (batch.poll_interval, batch.log_interval) == (5.0, 7.0)
    ecs = op.backend_for("ecs")
    assert (ecs.poll_interval_seconds, ecs.placement_timeout_seconds) == (5.0, 600.0)


def test_unset_intervals_keep_the_backends_defaults():
    op = job()
    op._config = CONFIG
    batch = op.backend_for("batch")
    assert (batch.poll_interval, batch.log_interval) == (30.0, 30.0)
    ecs = op.backend_for("ecs")
    assert (ecs.poll_interval_seconds, ecs.placement_timeout_seconds) == (30.0, 1800.0)
