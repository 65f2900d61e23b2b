"""Stack outputs -> connection fields: types, merging across stacks, and refusals."""

from __future__ import annotations

import pytest

from airflow_provider_trainium.compute.backends import resolve_compute
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.stack import (
    connection_extra,
    fields_from_outputs,
    merge_stack_fields,
    output_name,
)

BASE = {
    "RegionName": "us-west-2",
    "ArtifactRoot": "s3://bucket/trainium",
    "JobRoleArn": "arn:aws:iam::1:role/job",
    "EcsExecutionRoleArn": "arn:aws:iam::1:role/exec",
    "Subnets": "subnet-a, subnet-b",
    "SecurityGroups": "sg-1",
    "EcrRepository": "1.dkr.ecr.us-west-2.amazonaws.com/airflow-trainium/trainer",
    "LogGroup": "/trainium/base/jobs",
    "VpcId": "vpc-1",
    "InstanceProfileArn": "arn:aws:iam::1:instance-profile/p",
}
BATCH = {"BatchJobQueues": "trn1.32xlarge=arn:q1,trn2.48xlarge=arn:q2"}


def test_output_names_are_camel_case_field_names() -> None:
    assert output_name("ecs_execution_role_arn") == "EcsExecutionRoleArn"
    assert output_name("subnets") == "Subnets"


def test_outputs_become_typed_fields_and_other_outputs_are_left_out() -> None:
    fields = fields_from_outputs("b", {**BASE, **BATCH})
    assert fields["subnets"] == ["subnet-a", "subnet-b"]
    assert fields["security_groups"] == ["sg-1"]
    assert fields["batch_job_queues"] == {"trn1.32xlarge": "arn:q1", "trn2.48xlarge": "arn:q2"}
    assert "vpc_id" not in fields and "instance_profile_arn" not in fields


def test_the_batch_stacks_trn3_queue_becomes_the_connections_trn3_queue() -> None:
    """``configure`` maps the BatchJobQueues output, one pair per enabled instance type, trn3.48xlarge included."""
    fields = fields_from_outputs("b", {**BASE, "BatchJobQueues": "trn2.48xlarge=arn:q2,trn3.48xlarge=arn:q3"})
    assert fields["batch_job_queues"] == {"trn2.48xlarge": "arn:q2", "trn3.48xlarge": "arn:q3"}


def test_three_stacks_make_one_connection() -> None:
    ecs = {"EcsCluster": "c", "EcsCapacityProvider": "cp"}
    extra = connection_extra([("base", BASE), ("ecs", ecs), ("batch", BATCH)], aws_conn_id="aws_prod")
    config = TrainiumConfig.from_extra(extra)
    assert config.aws_conn_id == "aws_prod"
    assert config.ecs_capacity_provider == "cp"
    assert config.batch_job_queues["trn2.48xlarge"] == "arn:q2"
    assert resolve_compute("auto", config, 4) == "batch"


def test_two_batch_stacks_add_their_queues_but_may_not_redefine_one() -> None:
    merged = merge_stack_fields(
        [("a", {"BatchJobQueues": "trn1.32xlarge=q1"}), ("b", {"BatchJobQueues": "trn2.48xlarge=q2"})]
    )
    assert merged["batch_job_queues"] == {"trn1.32xlarge": "q1", "trn2.48xlarge": "q2"}
    with pytest.raises(ValueError, match=r"stacks a and b both define Batch queues for \['trn1.32xlarge'\]"):
        merge_stack_fields(
            [("a", {"BatchJobQueues": "trn1.32xlarge=q1"}), ("b", {"BatchJobQueues": "trn1.32xlarge=q9"})]
        )


def test_stacks_that_disagree_are_refused() -> None:
    with pytest.raises(ValueError, match="stacks one and two disagree on RegionName"):
        merge_stack_fields([("one", {"RegionName": "us-east-1"}), ("two", {"RegionName": "us-west-2"})])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("p4d.24xlarge=q", "'p4d.24xlarge', which is not a Trainium instance type"),
        ("trn1.32xlarge", "is not instance_type=queue"),
    ],
)
def test_bad_queue_outputs_are_refused(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fields_from_outputs("batch", {"BatchJobQueues": value})


def test_a_connection_needs_the_base_stack() -> None:
    with pytest.raises(ValueError, match=r"stacks batch have no outputs \['RegionName', 'ArtifactRoot'"):
        connection_extra([("batch", BATCH)], aws_conn_id="aws_default")
