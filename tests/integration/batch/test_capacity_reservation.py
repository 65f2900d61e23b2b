"""A job on a capacity reservation goes to the Batch queue ``capacity_reservations`` maps it to; one the map
lacks is refused before SubmitJob. Real operator and Batch backend on the moto server."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest

from airflow_provider_trainium.hooks.trainium import TrainiumHook
from tests.integration.batch import moto_batch
from tests.integration.batch.test_operator_batch import TaskInstanceStandIn, context, jobs_named, operator
from tests.integration.conftest import calls

CR = "cr-0123456789abcdef0"
RESERVED_QUEUE = "trn-capacity-block"


@pytest.fixture
def reserved(batch_env, aws_conn_id, monkeypatch):
    """A second queue (the stack launched into the reservation) and the connection's map pointing at it."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    moto_batch.create_queue(
        batch_env.batch, AwsBaseHook(aws_conn_id=aws_conn_id, client_type="iam").conn, RESERVED_QUEUE
    )
    connection = json.loads(os.environ["AIRFLOW_CONN_TRAINIUM_DEFAULT"])
    connection["extra"]["capacity_reservations"] = {CR: {"batch_job_queue": RESERVED_QUEUE}}
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps(connection))
    return dataclasses.replace(batch_env, config=TrainiumHook().get_config())


def test_a_reserved_job_goes_to_the_mapped_queue_and_a_retry_finds_it_there(reserved, moto_requests):
    from airflow.sdk.exceptions import TaskDeferred

    ti = TaskInstanceStandIn()
    with pytest.raises(TaskDeferred) as first:
        operator(capacity_reservation=CR).execute(context(ti))
    job_id = first.value.trigger.handle["job_id"]
    assert first.value.trigger.handle["details"]["job_queue"] == RESERVED_QUEUE
    assert [j["jobId"] for j in jobs_named(dataclasses.replace(reserved, queue=RESERVED_QUEUE), ti)] == [job_id]
    assert jobs_named(reserved, ti) == []  # nothing on the default queue

    moto_batch.hold_running(reserved.region, [job_id])
    again = operator(capacity_reservation=CR)
    attached = again.attach(context(ti), again.prepare(context(ti)))
    assert attached.handle.job_id == job_id and attached.status is not None  # no second job
    assert calls(moto_requests(), path="/v1/submitjob") == 1


@pytest.mark.parametrize(
    ("routes", "needle"),
    [({}, f"capacity reservation {CR} is not in"), ({CR: {"ecs_cluster": "c"}}, "has no batch_job_queue")],
)
def test_an_unmapped_reservation_fails_the_task_before_submit(batch_env, moto_requests, monkeypatch, routes, needle):
    from airflow.providers.common.compat.sdk import AirflowFailException

    connection = json.loads(os.environ["AIRFLOW_CONN_TRAINIUM_DEFAULT"])
    connection["extra"]["capacity_reservations"] = routes
    monkeypatch.setenv("AIRFLOW_CONN_TRAINIUM_DEFAULT", json.dumps(connection))
    with pytest.raises(AirflowFailException, match=needle) as failed:
        operator(capacity_reservation=CR).execute(context(TaskInstanceStandIn()))
    assert CR in str(failed.value) and "capacity_reservations" in str(failed.value)
    recorded = moto_requests()
    assert calls(recorded, path="/v1/submitjob") == 0 and calls(recorded, path="/v1/registerjobdefinition") == 0


def test_preflight_checks_the_mapped_queue(reserved):
    from airflow_provider_trainium.preflight import run_preflight

    results = run_preflight(
        reserved.config, instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None, capacity_reservation=CR
    )
    by_name = {r.name: r for r in results}
    assert RESERVED_QUEUE in by_name["batch queue"].reason, by_name["batch queue"]
    assert f"{RESERVED_QUEUE}-env" in by_name["compute environment"].reason, by_name["compute environment"]
