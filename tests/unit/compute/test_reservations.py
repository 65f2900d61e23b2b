"""The ``capacity_reservations`` connection field, its routing, and the reservation in the job spec."""

from __future__ import annotations

import logging

import pytest

from airflow_provider_trainium.compute.reservations import ReservationError, reservation_route
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.hooks.trainium_fields import CAPACITY_RESERVATION_ID
from airflow_provider_trainium.neuron.spec import CAPACITY_RESERVATION_RE, JobSpec, JobSpecError
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.reservation import routed_config

CR = "cr-0123456789abcdef0"
ROUTES = {
    CR: {"batch_job_queue": "trainium-cb-trn1", "ecs_cluster": "trainium-cb", "ecs_capacity_provider": "cb-asg"},
    "cr-0aaaaaaaa": {"batch_job_queue": "only-batch"},
}


def config(**extra: object) -> TrainiumConfig:
    return TrainiumConfig.from_extra({"batch_job_queues": {"trn1.32xlarge": "default-q"}, **extra})


def test_the_map_parses_into_the_config():
    assert config(capacity_reservations=ROUTES).capacity_reservations == ROUTES
    assert config().capacity_reservations == {} and config(capacity_reservations=None).capacity_reservations == {}


@pytest.mark.parametrize(
    ("routes", "problem"),
    [
        ({"cr-XYZ": {"batch_job_queue": "q"}}, "capacity_reservations"),  # not an id
        ({"cr-0123456": {"batch_job_queue": "q"}}, "capacity_reservations"),  # 7 hex digits: too short
        ({CR: {"job_queue": "q"}}, "job_queue"),  # a key no backend reads
        ({CR: {}}, "capacity_reservations"),  # an empty entry routes nothing
        ({CR: {"batch_job_queue": ""}}, "batch_job_queue"),
        ({CR: "trainium-cb-trn1"}, "capacity_reservations"),  # an entry is an object
    ],
)
def test_the_schema_refuses_a_bad_map(routes, problem):
    with pytest.raises(ValueError, match=problem):
        config(capacity_reservations=routes)


def test_the_spec_and_the_schema_share_one_id_pattern():
    assert CAPACITY_RESERVATION_RE.pattern == CAPACITY_RESERVATION_ID


def test_a_route_names_what_each_backend_reads():
    routed = config(capacity_reservations=ROUTES)
    assert reservation_route(routed, CR, "batch").batch_job_queue == "trainium-cb-trn1"
    ecs = reservation_route(routed, CR, "ecs")
    assert (ecs.ecs_cluster, ecs.ecs_capacity_provider) == ("trainium-cb", "cb-asg")


def test_an_unmapped_reservation_names_itself_and_the_field():
    with pytest.raises(ReservationError, match=r"cr-0fffffffffffffff0 is not in .*capacity_reservations") as err:
        reservation_route(config(capacity_reservations=ROUTES), "cr-0fffffffffffffff0", "batch")
    assert '"batch_job_queue"' in str(err.value) and CR in str(err.value)  # the example and what the map has


def test_an_entry_without_the_backends_keys_is_refused():
    with pytest.raises(ReservationError, match=r"no ecs_cluster and ecs_capacity_provider .*\[cr-0aaaaaaaa\]"):
        reservation_route(config(capacity_reservations=ROUTES), "cr-0aaaaaaaa", "ecs")


def test_the_reservation_changes_the_spec_hash_and_round_trips():
    plain = JobSpec(name="train", entry_point="trainium_trainer.check")
    reserved = plain.with_changes(capacity_reservation=CR)
    assert "capacity_reservation" not in plain.to_dict()  # a spec without one keeps its earlier hash
    assert reserved.content_hash() != plain.content_hash()
    assert reserved.content_hash() != plain.with_changes(capacity_reservation="cr-0aaaaaaaa").content_hash()
    assert JobSpec.from_dict(reserved.to_dict()) == reserved


def test_the_spec_refuses_what_is_not_a_reservation_id():
    with pytest.raises(JobSpecError, match="capacity_reservation 'r-123' is not a capacity reservation id"):
        JobSpec(name="train", entry_point="trainium_trainer.check", capacity_reservation="r-123").validate()


def test_preflight_checks_the_mapped_queue_and_cluster():
    routed = config(capacity_reservations=ROUTES, ecs_cluster="default", ecs_capacity_provider="default-asg")
    batch = routed_config(routed, Layout("trn1.32xlarge", 2, "batch", None, CR))
    assert batch.batch_job_queues["trn1.32xlarge"] == "trainium-cb-trn1"
    ecs = routed_config(routed, Layout("trn1.2xlarge", 1, "ecs", None, CR))
    assert (ecs.ecs_cluster, ecs.ecs_capacity_provider) == ("trainium-cb", "cb-asg")
    assert routed_config(routed, Layout("trn1.32xlarge", 2, "batch", None)) is routed
    assert routed_config(routed, Layout("trn1.2xlarge", 1, "local", None, "cr-0fffffffff")) is routed


def test_preflight_refuses_an_unmapped_reservation_as_the_connection_check():
    from airflow_provider_trainium.preflight import run_preflight

    results = run_preflight(
        config(), instance_type="trn1.32xlarge", nodes=2, compute="batch", image=None, capacity_reservation=CR
    )
    by_name = {r.name: r for r in results}
    assert by_name["connection"].status == "error" and CR in by_name["connection"].reason
    assert "capacity_reservations" in by_name["connection"].reason
    assert by_name["batch queue"].status == "warning"  # not asked: the job would be refused first


def test_local_compute_ignores_the_reservation_with_an_info_line(tmp_path, caplog):
    from airflow_provider_trainium.compute.local.backend import LocalBackend

    spec = JobSpec(name="train", entry_point="trainium_trainer.check", capacity_reservation=CR)
    with caplog.at_level(logging.INFO):
        LocalBackend(tmp_path).check(spec)
    (record,) = [r for r in caplog.records if CR in r.getMessage()]
    assert record.levelno == logging.INFO and "local compute" in record.getMessage()
