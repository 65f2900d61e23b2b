"""Walk a run's ``compute``/``nodes`` from the operator to SubmitJob and count the rooms it enters."""

from __future__ import annotations

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import StateStore, TaskInstanceStandIn
from tests.integration.submit_walk import record, walk_to


def test_the_batch_submit_walk(batch_env):
    op = TrainiumJobOperator(task_id="allreduce", entry_point="trainium_trainer.allreduce", compute="batch",
                             instance_type="trn1.32xlarge", nodes=2)  # fmt: skip
    context = {"ti": TaskInstanceStandIn(), "task_state_store": StateStore()}
    client = op.backend_for(op.prepare(context).compute).hook.client
    op._prepared = None  # walk the whole try, prepare included
    vars(op._backend).pop("_plans", None)  # and the container plan, which the backend keeps per spec
    walk = walk_to(client, "SubmitJob", lambda: op.execute(context))
    record("batch", walk)
    assert walk.done and walk.stops[0].endswith("operators.job")
