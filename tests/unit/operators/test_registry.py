"""Which job's cost a registered version records: the nearest upstream trainer, or the one named."""

from __future__ import annotations

import datetime as dt

from airflow.sdk import DAG

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from airflow_provider_trainium.operators.registry import TrainiumRegisterModelOperator
from airflow_provider_trainium.operators.training import TrainiumTrainingOperator


def pipeline(**register_kwargs) -> TrainiumRegisterModelOperator:
    with DAG("cost_lineage", schedule=None, start_date=dt.datetime(2026, 1, 1)):
        prepare = TrainiumJobOperator(
            task_id="prepare", entry_point="trainium_trainer.mnist_mlp.prepare", distributed=False
        )
        train = TrainiumTrainingOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train")
        evaluate = TrainiumJobOperator(
            task_id="evaluate", entry_point="trainium_trainer.mnist_mlp.evaluate", distributed=False
        )
        register = TrainiumRegisterModelOperator(
            task_id="register", model_name="m", source_uri="file:///x", **register_kwargs
        )
        prepare >> train >> evaluate >> register
    return register


def test_the_nearest_upstream_trainer_is_the_cost_of_the_version():
    assert pipeline().cost_task() == "train"  # not the evaluation job right before it


def test_a_named_task_wins():
    assert pipeline(cost_task_id="evaluate").cost_task() == "evaluate"


def test_without_a_trainer_the_nearest_job_is_taken():
    with DAG("no_trainer", schedule=None, start_date=dt.datetime(2026, 1, 1)):
        job = TrainiumJobOperator(task_id="job", entry_point="trainium_trainer.allreduce")
        register = TrainiumRegisterModelOperator(task_id="register", model_name="m", source_uri="file:///x")
        job >> register
    assert register.cost_task() == "job"
