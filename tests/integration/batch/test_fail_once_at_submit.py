"""What only the platform can tell at submit time, a Spot queue for a multi-node job or a queue (or ECS
cluster) that does not exist, fails the task once (``AirflowFailException``): a retry would ask the same queue
the same question, so it is never retried, and nothing is submitted (the error types: tests/unit/compute/
test_base_input_errors.py).

Real operator, real backends on the moto server (a Spot compute environment and its queue made as the Batch
stack makes them); only the task instance is a stand-in.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from airflow_provider_trainium.compute.base import JobInputError
from tests.conftest import set_trainium_connection
from tests.integration.batch.conftest import CallCounter
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, operator
from tests.integration.batch.test_queue_checks import managed_queue


def point_queues_at(monkeypatch: pytest.MonkeyPatch, queue: str) -> None:
    """``trainium_default`` as the fixture wrote it, with every instance type's queue set to ``queue``."""
    extra: dict[str, Any] = json.loads(os.environ["AIRFLOW_CONN_TRAINIUM_DEFAULT"])["extra"]
    extra["batch_job_queues"] = dict.fromkeys(extra["batch_job_queues"], queue)
    set_trainium_connection(monkeypatch, **extra)


def fails_once(op: Any, ti: TaskInstanceStandIn) -> tuple[str, CallCounter]:
    from airflow.providers.common.compat.sdk import AirflowException, AirflowFailException

    prepared = op.prepare(context(ti))
    counter = CallCounter().attach(op.backend_for(prepared.compute).hook.client)
    with pytest.raises(AirflowException) as failed:
        op.execute(context(ti))
    assert isinstance(failed.value, AirflowFailException), f"retryable: {type(failed.value).__name__}: {failed.value}"
    assert isinstance(failed.value.__cause__, JobInputError)
    return str(failed.value), counter


def test_a_multi_node_job_on_a_spot_queue_fails_once_without_submitting(batch_env, aws_conn_id, monkeypatch):
    point_queues_at(monkeypatch, managed_queue(batch_env, aws_conn_id, "trn-spot", "SPOT"))
    message, counter = fails_once(operator(), TaskInstanceStandIn())
    assert "does not run multi-node parallel jobs on Spot" in message and "trn-spot-env" in message
    assert counter["SubmitJob"] == 0 and counter["RegisterJobDefinition"] == 0


def test_a_queue_batch_does_not_know_fails_once_without_submitting(batch_env, monkeypatch):
    point_queues_at(monkeypatch, "no-such-queue")
    message, counter = fails_once(operator(), TaskInstanceStandIn())
    assert "AWS Batch has no job queue 'no-such-queue'" in message
    assert counter["SubmitJob"] == 0
