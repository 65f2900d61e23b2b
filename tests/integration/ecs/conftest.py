"""An ECS cluster of Trainium container instances on the moto server, reached through ``aws_moto``.

moto registers every container instance as 4 vCPU / 7.3 GiB whatever its EC2 type; ``add_instance``
sets the CPU and memory a real instance of that type registers, so placement behaves as on AWS (a
trn1.32xlarge task does not fit on a trn1.2xlarge). moto runs in this process (ThreadedMotoServer), so
that is a change of the fake cloud's state, made once when the instance registers.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import requests

from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.catalog import get_instance_type
from tests.conftest import MOTO_REGION
from tests.integration.conftest import EXECUTION_ROLE_ARN, JOB_ROLE_ARN, register_image

CLUSTER = "trainium-test"
#: Remote compute only takes S3 locations; the bucket exists on the moto server (see ``ecs_world``).
ARTIFACT_BUCKET = "trainium-test-artifacts"
ARTIFACT_ROOT = f"s3://{ARTIFACT_BUCKET}/trainium"
LOG_GROUP = "/trainium/test"
#: moto does not validate AMI ids; this stands for the ECS-optimized Neuron AMI.
AMI = "ami-0e1c5be2aa956338b"
REPOSITORY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium-training"
#: Jobs run only digest-pinned images of the connection's repository.
IMAGE = f"{REPOSITORY}@sha256:{'ab' * 32}"
#: Share of nominal memory the kernel reports (and ECS registers) on these instance types.
REGISTERED_MEMORY_FRACTION = 0.97


def aws_client(aws_conn_id: str, service: str) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=aws_conn_id, client_type=service).conn


def set_registered_resources(cluster: str, container_instance_arn: str, instance_type: str) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ecs.models import ecs_backends

    instance = get_instance_type(instance_type)
    values = {"CPU": instance.vcpus * 1024, "MEMORY": int(instance.memory_gib * 1024 * REGISTERED_MEMORY_FRACTION)}
    ci = ecs_backends[DEFAULT_ACCOUNT_ID][MOTO_REGION].container_instances[cluster][
        container_instance_arn.rsplit("/", 1)[-1]
    ]
    for resources in (ci.registered_resources, ci.remaining_resources):
        for resource in resources:
            if resource["name"] in values:
                resource["integerValue"] = values[resource["name"]]


@dataclass
class EcsWorld:
    aws_conn_id: str
    subnet_id: str
    security_group_id: str
    cluster: str = CLUSTER
    instances: list[str] = field(default_factory=list)

    clients: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str) -> Any:
        if service not in self.clients:
            self.clients[service] = aws_client(self.aws_conn_id, service)
        return self.clients[service]

    @property
    def ecs(self) -> Any:
        return self.client("ecs")

    @property
    def logs(self) -> Any:
        return self.client("logs")

    def add_instance(self, instance_type: str) -> str:
        """Launch an EC2 instance of ``instance_type`` and register it with the cluster."""
        instance = self.client("ec2").run_instances(
            ImageId=AMI, InstanceType=instance_type, MinCount=1, MaxCount=1, SubnetId=self.subnet_id
        )["Instances"][0]
        document = json.dumps({"instanceId": instance["InstanceId"], "instanceType": instance_type})
        arn = self.ecs.register_container_instance(cluster=self.cluster, instanceIdentityDocument=document)[
            "containerInstance"
        ]["containerInstanceArn"]
        set_registered_resources(self.cluster, arn, instance_type)
        self.instances.append(arn)
        return arn

    def config(self, **changes: Any) -> TrainiumConfig:
        extra: dict[str, Any] = {
            "aws_conn_id": self.aws_conn_id,
            "region_name": MOTO_REGION,
            "artifact_root": ARTIFACT_ROOT,
            "ecs_cluster": self.cluster,
            "subnets": [self.subnet_id],
            "security_groups": [self.security_group_id],
            "log_group": LOG_GROUP,
            "image": IMAGE,
            "ecr_repository": REPOSITORY,
            "ecs_execution_role_arn": "arn:aws:iam::123456789012:role/trainium-execution",
            "job_role_arn": "arn:aws:iam::123456789012:role/trainium-job",
        }
        extra.update(changes)
        return TrainiumConfig.from_extra({k: v for k, v in extra.items() if v is not None})

    def write_log(self, stream: str, lines: list[str]) -> None:
        with contextlib.suppress(self.logs.exceptions.ResourceAlreadyExistsException):
            self.logs.create_log_stream(logGroupName=LOG_GROUP, logStreamName=stream)
        now_ms = int(time.time() * 1000)  # CloudWatch drops events dated too far in the past
        events = [{"timestamp": now_ms + i, "message": line} for i, line in enumerate(lines)]
        self.logs.put_log_events(logGroupName=LOG_GROUP, logStreamName=stream, logEvents=events)


@pytest.fixture
def ecs_world(aws_conn_id: str, monkeypatch: pytest.MonkeyPatch) -> EcsWorld:
    """A VPC subnet and security group, an empty ECS cluster and the log group; add instances per test."""
    # moto's catalogue of public AMIs takes seconds to load after each reset and nothing here uses it
    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    world = EcsWorld(aws_conn_id, subnet_id="", security_group_id="")
    ec2 = world.client("ec2")
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": True})  # as awsvpc tasks need
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.0.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="trainium", Description="trainium tasks", VpcId=vpc)["GroupId"]
    world.ecs.create_cluster(clusterName=CLUSTER)
    world.logs.create_log_group(logGroupName=LOG_GROUP)
    world.client("s3").create_bucket(Bucket=ARTIFACT_BUCKET)
    world.subnet_id, world.security_group_id = subnet, group
    return world


@pytest.fixture
def task_progress(moto_reset: str) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Set how moto advances ECS tasks (RUNNING -> ... -> STOPPED, 4 steps) per DescribeTasks call."""

    def set_progress(transition: dict[str, Any]) -> None:
        requests.post(
            f"{moto_reset}/moto-api/state-manager/set-transition",
            json={"model_name": "ecs::task", "transition": transition},
            timeout=10,
        ).raise_for_status()

    yield set_progress
    requests.post(
        f"{moto_reset}/moto-api/state-manager/unset-transition", json={"model_name": "ecs::task"}, timeout=10
    ).raise_for_status()


class CallCounter:
    """Counts API calls made through one botocore client, by operation name."""

    def __init__(self, client: Any) -> None:
        self.calls: list[str] = []
        client.meta.events.register("before-call.ecs.*", self._record)

    def _record(self, model: Any, **_: Any) -> None:
        self.calls.append(model.name)

    def count(self, operation: str) -> int:
        return self.calls.count(operation)


def connect_trainium(world: EcsWorld, monkeypatch: pytest.MonkeyPatch, **extra: object) -> None:
    """``trainium_default`` pointing at this world's cluster, subnets, log group and trusted image (in ECR), with
    the roles the base stack creates: what `airflow trainium configure` writes for a real deployment."""
    from tests.conftest import set_trainium_connection

    register_image(world.client("ecr"), IMAGE)
    fields: dict[str, object] = {
        "aws_conn_id": world.aws_conn_id,
        "region_name": "us-east-1",
        "artifact_root": ARTIFACT_ROOT,  # remote compute only takes S3 locations
        "ecs_cluster": CLUSTER,
        "subnets": [world.subnet_id],
        "security_groups": [world.security_group_id],
        "log_group": LOG_GROUP,
        "image": IMAGE,
        "ecr_repository": REPOSITORY,
        "job_role_arn": JOB_ROLE_ARN,
        "ecs_execution_role_arn": EXECUTION_ROLE_ARN,
    }
    set_trainium_connection(monkeypatch, **{**fields, **extra})
