"""One event shape for every backend: what a watch loop yields is what execute_complete reads back."""

from __future__ import annotations

import inspect

import pytest

from airflow_provider_trainium.compute.base import JobEvent, JobState, JobStatus
from airflow_provider_trainium.compute.batch.watch import BatchJobWatch
from airflow_provider_trainium.compute.ecs.watch import EcsTaskWatch
from airflow_provider_trainium.compute.watch import watch_kwargs
from airflow_provider_trainium.triggers.batch import TrainiumBatchJobTrigger
from airflow_provider_trainium.triggers.ecs import TrainiumEcsTaskTrigger

EVENT = JobEvent(
    handle={"backend": "batch", "job_id": "j-1", "job_name": "train", "details": {"num_nodes": 2}},
    state=JobState.FAILED,
    reason="Essential container exited",
    exit_code=65,
    log_tail=("[node 0] loss nan", "[node 1] loss nan"),
    log_streams={"0": "s/0", "1": "s/1"},
)


def test_event_round_trips_through_its_dict():
    assert JobEvent.from_dict(EVENT.to_dict()) == EVENT


def test_job_status_reads_the_event_dict():
    assert JobStatus.from_event(EVENT.to_dict()) == JobStatus(
        JobState.FAILED, "Essential container exited", 65, ("[node 0] loss nan", "[node 1] loss nan")
    )


def test_an_unknown_state_is_an_error_not_a_success():
    with pytest.raises(ValueError):
        JobEvent.from_dict({**EVENT.to_dict(), "state": "DONE"})


@pytest.mark.parametrize(
    ("trigger", "watch"), [(TrainiumBatchJobTrigger, BatchJobWatch), (TrainiumEcsTaskTrigger, EcsTaskWatch)]
)
def test_a_trigger_takes_exactly_its_watch_loops_arguments(trigger, watch):
    """The backend builds the trigger from ``watch_kwargs``: the two must not drift apart."""
    params = set(inspect.signature(trigger.__init__).parameters) - {"self"}
    loop = watch(handle={"job_id": "j", "details": {}}, deadline=0.0, aws_conn_id=None)
    assert set(watch_kwargs(loop)) == params
