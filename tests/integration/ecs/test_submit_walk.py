"""Walk a run's ``compute``/``nodes`` from the operator to RunTask and count the rooms it enters."""

from __future__ import annotations

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn
from tests.integration.ecs.conftest import connect_trainium
from tests.integration.submit_walk import walk_a_whole_try
from tests.task_instance import StateStore


def test_the_ecs_submit_walk(ecs_world, monkeypatch):
    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    op = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs",
                             instance_type="trn1.2xlarge", nodes=1)  # fmt: skip
    context = {
        "ti": TaskInstanceStandIn(dag_id="trainium_mnist_mlp", task_id="train"),
        "task_state_store": StateStore(),
    }
    walk_a_whole_try("ecs", op, context, lambda backend: backend.hook.conn, "RunTask")
