"""Walk a run's ``compute``/``nodes`` from the operator to RunTask and count the rooms it enters."""

from __future__ import annotations

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import StateStore, TaskInstanceStandIn
from tests.integration.ecs.conftest import connect_trainium
from tests.integration.submit_walk import record, walk_to


def test_the_ecs_submit_walk(ecs_world, monkeypatch):
    ecs_world.add_instance("trn1.2xlarge")
    connect_trainium(ecs_world, monkeypatch)
    op = TrainiumJobOperator(task_id="train", entry_point="trainium_trainer.mnist_mlp.train", compute="ecs",
                             instance_type="trn1.2xlarge", nodes=1)  # fmt: skip
    context = {
        "ti": TaskInstanceStandIn(dag_id="trainium_mnist_mlp", task_id="train"),
        "task_state_store": StateStore(),
    }
    client = op.backend_for(op.prepare(context).compute).hook.conn
    op._prepared = None  # walk the whole try, prepare included
    vars(op._backend).pop("_plans", None)  # and the container plan, which the backend keeps per spec
    walk = walk_to(client, "RunTask", lambda: op.execute(context))
    record("ecs", walk)
    assert walk.done and walk.stops[0].endswith("operators.job")
