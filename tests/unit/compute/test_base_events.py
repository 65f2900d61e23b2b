"""One event shape for every backend: what a watch loop yields is what execute_complete reads back."""

from __future__ import annotations

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
    billed_intervals=((1_800_000_000.0, 1_800_003_600.5), (1_800_000_060.0, None)),
)


def test_event_round_trips_through_its_dict():
    assert JobEvent.from_dict(EVENT.to_dict()) == EVENT
    assert EVENT.to_dict()["billed_intervals"] == [[1_800_000_000.0, 1_800_003_600.5], [1_800_000_060.0, None]]


def test_an_event_stored_before_it_carried_intervals_still_reads_and_leaves_the_bill_to_the_platform():
    stored = {k: v for k, v in EVENT.to_dict().items() if k != "billed_intervals"}
    event = JobEvent.from_dict(stored)
    assert event.billed_intervals is None and event.status().billed_intervals is None
    assert event.state is JobState.FAILED and event.log_streams == EVENT.log_streams


def test_no_intervals_differs_from_unknown_intervals():
    """A job that never started was billed nothing (``[]``); None means nobody saw its bill."""
    assert JobEvent.from_dict({**EVENT.to_dict(), "billed_intervals": []}).billed_intervals == ()
    assert JobEvent.from_dict({**EVENT.to_dict(), "billed_intervals": None}).billed_intervals is None


def test_job_status_reads_the_event_dict():
    assert JobStatus.from_event(EVENT.to_dict()) == JobStatus(
        JobState.FAILED,
        "Essential container exited",
        65,
        ("[node 0] loss nan", "[node 1] loss nan"),
        EVENT.billed_intervals,
    )


def test_an_unknown_state_is_an_error_not_a_success():
    with pytest.raises(ValueError):
        JobEvent.from_dict({**EVENT.to_dict(), "state": "DONE"})


@pytest.mark.parametrize(
    ("trigger", "watch"), [(TrainiumBatchJobTrigger, BatchJobWatch), (TrainiumEcsTaskTrigger, EcsTaskWatch)]
)
def test_a_trigger_serializes_exactly_its_watch_loops_arguments(trigger, watch):
    """The trigger declares no field of its own: what it stores is the loop's ``watch_kwargs``."""
    loop = watch(handle={"job_id": "j", "details": {}}, deadline=0.0, aws_conn_id=None)
    shell = trigger(watch=watch_kwargs(loop))
    assert trigger.watch_class is watch and type(shell.watch()) is watch
    assert shell.serialize()[1] == {"watch": watch_kwargs(loop)}
