"""Task definitions and RunTask requests, built without AWS and checked field by field."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.validate import validate_parameters

from airflow_provider_trainium.compute.ecs.backend import EcsBackend, EcsInputError
from airflow_provider_trainium.compute.ecs.definitions import (
    EcsTaskSettings,
    container_overrides,
    log_stream_name,
    task_definition,
)
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.releases import auto_stack
from airflow_provider_trainium.neuron.spec import JobSpec

IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium-training:2.31"
SETTINGS = EcsTaskSettings(
    image=IMAGE,
    log_group="/trainium/jobs",
    region_name="us-east-1",
    execution_role_arn="arn:aws:iam::123456789012:role/trainium-execution",
    task_role_arn="arn:aws:iam::123456789012:role/trainium-job",
)
BASE_ENV = [
    {"name": "MALLOC_ARENA_MAX", "value": "64"},
    {"name": "NEURON_FUSE_SOFTMAX", "value": "1"},
    {"name": "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS", "value": "3"},
    {"name": "PYTHONUNBUFFERED", "value": "1"},
]


def preset_env(stack: str) -> list[dict[str, str]]:
    """The presets of ``stack``'s image: the native release deprecates implicit async (neuron/releases.toml)."""
    deprecated = {"native": {"NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS"}}.get(stack, set())
    return [e for e in BASE_ENV if e["name"] not in deprecated]


def ecs_shape(operation: str):
    return botocore.session.get_session().get_service_model("ecs").operation_model(operation).input_shape


def plan_for(instance_type: str, image: str = IMAGE):
    """The plan of a one-node job on ``instance_type``: its task definition depends on nothing per run."""
    stack = auto_stack(instance_type)
    return container_plan(
        JobSpec(
            name="train",
            entry_point="trainium_trainer.mnist_mlp.train",
            instance_type=instance_type,
            image=image,
            stack=stack,
        )
    )


def expected_definition(instance_type: str, chips: int, cpu: int, memory: int, shm: int, peak: str) -> dict:
    return {
        "requiresCompatibilities": ["EC2"],
        "networkMode": "awsvpc",
        "cpu": str(cpu),
        "memory": str(memory),
        "placementConstraints": [{"type": "memberOf", "expression": f"attribute:ecs.instance-type == {instance_type}"}],
        "containerDefinitions": [
            {
                "name": "trainer",
                "image": IMAGE,
                "essential": True,
                "cpu": cpu,
                "memory": memory,
                "environment": [
                    *preset_env(auto_stack(instance_type)),
                    {"name": "TRAINIUM_INSTANCE_TYPE", "value": instance_type},
                    {"name": "TRAINIUM_PEAK_FLOPS", "value": peak},
                    {"name": "TRAINIUM_STACK", "value": auto_stack(instance_type)},
                ],
                "linuxParameters": {
                    "devices": [
                        {
                            "hostPath": f"/dev/neuron{i}",
                            "containerPath": f"/dev/neuron{i}",
                            "permissions": ["read", "write"],
                        }
                        for i in range(chips)
                    ],
                    "capabilities": {"add": ["IPC_LOCK"]},
                    "sharedMemorySize": shm,
                    "initProcessEnabled": True,
                },
                "ulimits": [
                    {"name": "memlock", "softLimit": -1, "hardLimit": -1},
                    {"name": "nofile", "softLimit": 65535, "hardLimit": 65535},
                ],
                "stopTimeout": 120,
                "logConfiguration": {
                    "logDriver": "awslogs",
                    "options": {
                        "awslogs-group": "/trainium/jobs",
                        "awslogs-region": "us-east-1",
                        "awslogs-stream-prefix": "trainium",
                    },
                },
            }
        ],
        "executionRoleArn": "arn:aws:iam::123456789012:role/trainium-execution",
        "taskRoleArn": "arn:aws:iam::123456789012:role/trainium-job",
    }


# cpu: vCPUs x 1024 minus one vCPU; memory: minus max(2 GiB, 5 %), whole GiB; shm: 1/8 of the instance;
# peak: one NeuronCore's dense BF16 FLOP/s (Trn1: 190 TFLOPS per chip, 2 cores; Trn2: 667 per chip, 4 logical
# cores; Trn3: 671 per chip, 4 logical cores).
@pytest.mark.parametrize(
    ("instance_type", "chips", "cpu", "memory", "shm", "peak"),
    [
        ("trn1.2xlarge", 1, 7 * 1024, 30 * 1024, 4 * 1024, "9.5e+13"),  # 8 vCPU, 32 GiB
        ("trn1.32xlarge", 16, 127 * 1024, 486 * 1024, 64 * 1024, "9.5e+13"),  # 128 vCPU, 512 GiB
        ("trn2.48xlarge", 16, 191 * 1024, 1945 * 1024, 256 * 1024, "1.6675e+14"),  # 192 vCPU, 2 TiB
        ("trn3.48xlarge", 16, 191 * 1024, 1945 * 1024, 256 * 1024, "1.6775e+14"),  # 192 vCPU, 2 TiB
    ],
)
def test_task_definition_field_by_field(instance_type, chips, cpu, memory, shm, peak):
    definition = task_definition(plan_for(instance_type), SETTINGS)
    family = definition.pop("family")
    assert family.startswith(f"trainium-{instance_type.replace('.', '-')}-")
    assert len(family.rsplit("-", 1)[-1]) == 12
    assert definition == expected_definition(instance_type, chips, cpu, memory, shm, peak)
    validate_parameters({"family": family, **definition}, ecs_shape("RegisterTaskDefinition"))


def test_family_is_a_content_hash():
    first = task_definition(plan_for("trn1.2xlarge"), SETTINGS)["family"]
    assert task_definition(plan_for("trn1.2xlarge"), SETTINGS)["family"] == first
    other_image = EcsTaskSettings(**{**SETTINGS.__dict__, "image": IMAGE + "-next"})
    assert task_definition(plan_for("trn1.2xlarge"), other_image)["family"] != first
    assert task_definition(plan_for("trn1.32xlarge"), SETTINGS)["family"] != first


def test_roles_are_left_out_when_the_connection_has_none():
    bare = EcsTaskSettings(image=IMAGE, log_group="/trainium/jobs", region_name="us-east-1")
    definition = task_definition(plan_for("trn1.2xlarge"), bare)
    assert "executionRoleArn" not in definition and "taskRoleArn" not in definition


def test_overrides_carry_node_zero_command_and_the_job_env():
    spec = JobSpec(
        name="train",
        entry_point="trainium_trainer.mnist_mlp.train",
        args=("--epochs", "3"),
        env={"TRAINIUM_COMPILE_CACHE_URI": "s3://bucket/cache"},
        output_uri="s3://bucket/runs/train",
        image=IMAGE,
    )
    (container,) = container_overrides(container_plan(spec))["containerOverrides"]
    assert container["name"] == "trainer"
    assert container["command"] == launcher_arguments(spec)
    assert "--nproc-per-node=2" in container["command"] and "--nodes=1" in container["command"]
    assert container["environment"] == [
        {"name": "TRAINIUM_COMPILE_CACHE_URI", "value": "s3://bucket/cache"},
        {"name": "TRAINIUM_OUTPUT_URI", "value": "s3://bucket/runs/train"},
    ]


def test_log_stream_follows_the_awslogs_naming():
    assert log_stream_name("abc123") == "trainium/trainer/abc123"


def config(**extra) -> TrainiumConfig:
    base = {
        "ecs_cluster": "trainium",
        "subnets": ["subnet-1"],
        "log_group": "/trainium/jobs",
        "region_name": "us-east-1",
        "artifact_root": "s3://bucket/trainium",
    }
    return TrainiumConfig.from_extra({**base, **extra})


def test_run_task_request_uses_the_capacity_provider_or_ec2_never_both():
    spec = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=IMAGE)
    tags = {"airflow:dag_id": "dag", "airflow:run_id": "manual__2026-01-01T00:00:00+00:00"}
    with_cp = EcsBackend(config(ecs_capacity_provider="trn1-asg", security_groups=["sg-1"]))
    request = with_cp.run_task_request(container_plan(spec), "arn:td", "dag-train-abc", tags)
    assert request["capacityProviderStrategy"] == [{"capacityProvider": "trn1-asg", "weight": 1}]
    assert "launchType" not in request
    assert request["networkConfiguration"] == {
        "awsvpcConfiguration": {"subnets": ["subnet-1"], "assignPublicIp": "DISABLED", "securityGroups": ["sg-1"]}
    }
    assert request["startedBy"] == "dag-train-abc" and request["count"] == 1
    assert {"key": "airflow:run_id", "value": "manual__2026-01-01T00:00:00+00:00"} in request["tags"]
    assert {"key": "trainium:job-name", "value": "dag-train-abc"} in request["tags"]
    validate_parameters(request, ecs_shape("RunTask"))

    ec2 = EcsBackend(config()).run_task_request(container_plan(spec), "arn:td", "dag-train-abc", tags)
    assert ec2["launchType"] == "EC2" and "capacityProviderStrategy" not in ec2
    assert "securityGroups" not in ec2["networkConfiguration"]["awsvpcConfiguration"]
    validate_parameters(ec2, ecs_shape("RunTask"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"subnets": []}, "subnets is empty"),
        ({"ecs_cluster": None}, "ecs_cluster is not set"),
        ({"log_group": None}, "log_group is not set"),
    ],
)
def test_connection_without_what_ecs_needs_is_rejected(extra, message):
    with pytest.raises(EcsInputError, match=message) as caught:
        EcsBackend(config(**extra))
    assert isinstance(caught.value, ValueError)  # the operator turns it into a failure without retries


def test_spec_checks_name_every_problem():
    backend = EcsBackend(config())
    multi = JobSpec(
        name="train", entry_point="trainium_trainer.mnist_mlp.train", instance_type="trn1.32xlarge", nodes=2
    )
    with pytest.raises(EcsInputError) as caught:
        backend.check_spec(multi)
    assert "nodes=2" in str(caught.value) and "compute='batch'" in str(caught.value)
    assert "no image" in str(caught.value)
    huge = JobSpec(name="train", entry_point="trainium_trainer.mnist_mlp.train", image=IMAGE, args=("x" * 9000,))
    with pytest.raises(EcsInputError, match="over ECS's limit of 8192"):
        backend.check_spec(huge)
