"""On an image-running backend the job's image decides ``auto`` and refuses a stack it does not carry."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn
from tests.integration.ecs.conftest import connect_trainium
from tests.task_instance import StateStore


def prepare(stack: str):
    op = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs",
                             instance_type="trn2.48xlarge", stack=stack)  # fmt: skip
    return op.prepare({"ti": TaskInstanceStandIn(dag_id="d", task_id="train"), "task_state_store": StateStore()})


def test_auto_on_trn2_keeps_the_xla_image_on_xla_and_native_is_refused_before_submit(ecs_world, monkeypatch):
    from airflow.providers.common.compat.sdk import AirflowFailException

    connect_trainium(ecs_world, monkeypatch)  # its image is the project's XLA image (Neuron 2.28)
    assert prepare("auto").spec.stack == "xla"
    with pytest.raises(AirflowFailException, match="stack 'native' needs an image of that stack.*use stack 'xla'"):
        prepare("native")
    assert ecs_world.ecs.list_tasks(cluster=ecs_world.cluster)["taskArns"] == []
