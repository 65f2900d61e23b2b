"""An ECS cluster the connection names but ECS does not know is found only at submit time, and fails the task
once (``AirflowFailException``): a retry would ask for the same cluster. Nothing is registered or run.

Real operator and ECS backend on the moto server; only the task instance is a stand-in.
"""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.base import JobInputError
from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context
from tests.integration.ecs.conftest import CallCounter, connect_trainium


def test_a_cluster_ecs_does_not_know_fails_once_without_running_a_task(ecs_world, monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    connect_trainium(ecs_world, monkeypatch, ecs_cluster="no-such-cluster")
    op = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs")
    ti = TaskInstanceStandIn(dag_id="trainium_mnist_mlp", task_id="train")
    prepared = op.prepare(context(ti))
    counter = CallCounter(op.backend_for(prepared.compute).hook.conn)
    with pytest.raises(AirflowException) as failed:
        op.execute(context(ti))
    assert isinstance(failed.value, AirflowFailException), f"retryable: {type(failed.value).__name__}: {failed.value}"
    assert isinstance(failed.value.__cause__, JobInputError)
    assert "ECS cluster 'no-such-cluster' was not found" in str(failed.value)
    assert counter.count("RunTask") == 0 and counter.count("RegisterTaskDefinition") == 0
