"""Walk a run's ``compute``/``nodes`` from the operator to SubmitJob and count the rooms it enters."""

from __future__ import annotations

from airflow_provider_trainium.operators.job import TrainiumJobOperator
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn
from tests.integration.submit_walk import walk_a_whole_try
from tests.task_instance import StateStore


def test_the_batch_submit_walk(batch_env):
    op = TrainiumJobOperator(task_id="allreduce", entry_point="trainium_trainer.allreduce", compute="batch",
                             instance_type="trn1.32xlarge", nodes=2)  # fmt: skip
    context = {"ti": TaskInstanceStandIn(), "task_state_store": StateStore()}
    walk_a_whole_try("batch", op, context, lambda backend: backend.hook.client, "SubmitJob")
