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


def test_an_ecs_cluster_for_the_native_image_and_a_trn1_batch_queue_make_one_connection() -> None:
    """Each stack's driver goes to the instance types its hosts are, so an ECS Trn2 cluster on the native driver
    and a Batch Trn1 queue on the XLA one are not a disagreement (one connection-wide driver made them one)."""
    ecs = {"EcsCluster": "c", "ContainerInstanceType": "trn2.48xlarge", "NeuronDriverVersion": "2.31.7.0"}
    batch = {"BatchJobQueues": "trn1.32xlarge=arn:q1", "NeuronDriverVersion": "2.26.5.0",
             "NativeNeuronDriverVersion": "2.31.7.0"}  # fmt: skip
    config = TrainiumConfig.from_extra(connection_extra([("base", BASE), ("ecs", ecs), ("batch", batch)], "aws"))
    assert config.neuron_driver_versions == {"trn2.48xlarge": "2.31.7.0", "trn1.32xlarge": "2.26.5.0"}
    assert config.neuron_driver_version is None
    assert config.neuron_driver_for("trn2.48xlarge") == "2.31.7.0"
    assert config.neuron_driver_for("trn1.32xlarge") == "2.26.5.0"


def test_two_stacks_may_not_pin_two_drivers_on_one_instance_type() -> None:
    ecs = {"EcsCluster": "c", "ContainerInstanceType": "trn2.48xlarge", "NeuronDriverVersion": "2.26.5.0"}
    batch = {"BatchJobQueues": "trn2.48xlarge=arn:q2", "NativeNeuronDriverVersion": "2.31.7.0"}
    with pytest.raises(ValueError, match=r"stacks ecs and batch pin different Neuron drivers for \['trn2.48xlarge'\]"):
        merge_stack_fields([("ecs", ecs), ("batch", batch)])


def test_a_stack_of_the_one_driver_layout_still_configures() -> None:
    """A Batch stack deployed before NativeNeuronDriverVersion pinned NeuronDriverVersion on every queue; an ECS
    stack without ContainerInstanceType cannot say whose driver it is, which stays the connection-wide one."""
    old_batch = {"BatchJobQueues": "trn1.32xlarge=arn:q1,trn2.48xlarge=arn:q2", "NeuronDriverVersion": "2.26.5.0"}
    assert fields_from_outputs("b", old_batch)["neuron_driver_versions"] == {
        "trn1.32xlarge": "2.26.5.0",
        "trn2.48xlarge": "2.26.5.0",
    }
    assert fields_from_outputs("e", {"EcsCluster": "c", "NeuronDriverVersion": "2.26.5.0"}) == {
        "ecs_cluster": "c",
        "neuron_driver_version": "2.26.5.0",
    }
