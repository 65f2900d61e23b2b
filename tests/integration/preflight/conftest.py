"""A deployment as the stacks leave it, made once on the moto server for every preflight test.

Each test breaks one thing by pointing the trainium connection at a broken resource made here too (a
disabled queue, a Spot environment, a group without its self rules), so no test changes what another reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from tests.conftest import MOTO_REGION
from tests.integration.moto_quotas import set_ec2_quotas, trn_quota

AWS_CONN_ID = "aws_preflight"
ACCOUNT = "123456789012"
INSTANCE_TYPE = "trn1.32xlarge"
REPOSITORY = "trainium/train"
#: The account's On-Demand Trn vCPU quota: room for four trn1.32xlarge (128 vCPUs each).
TRN_QUOTA_VCPUS = 512


@dataclass(frozen=True)
class Deployment:
    """What the test deployment holds, by the names and ids a trainium connection uses."""

    subnet: str
    efa_group: str
    open_group: str
    job_role: str
    execution_role: str
    digest: str

    @property
    def image(self) -> str:
        return f"{ACCOUNT}.dkr.ecr.{MOTO_REGION}.amazonaws.com/{REPOSITORY}@{self.digest}"

    def extra(self, **changes: Any) -> dict[str, Any]:
        """A trainium connection on which every check passes, with ``changes`` applied (None drops a field)."""
        from airflow_provider_trainium.neuron.releases import table

        extra: dict[str, Any] = {
            "aws_conn_id": AWS_CONN_ID,
            "region_name": MOTO_REGION,
            "artifact_root": "s3://preflight-artifacts/runs",
            "ecs_cluster": "trainium",
            "ecs_capacity_provider": "trainium-trn",
            "ecs_execution_role_arn": self.execution_role,
            "job_role_arn": self.job_role,
            "batch_job_queues": {INSTANCE_TYPE: "trn-queue"},
            "subnets": [self.subnet],
            "security_groups": [self.efa_group],
            "ecr_repository": REPOSITORY,
            "log_group": "/trainium/jobs",
            "image": self.image,
            "neuron_driver_version": table().image.driver,
        }
        extra.update(changes)
        return {k: v for k, v in extra.items() if v is not None}


def _client(kind: str) -> Any:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    return AwsBaseHook(aws_conn_id=AWS_CONN_ID, client_type=kind, region_name=MOTO_REGION).conn


def _environment(name: str, subnet: str, group: str, *, kind: str = "EC2", max_vcpus: int = 512) -> str:
    """A managed compute environment of ``kind`` (EC2 or SPOT) offering the instance type, as the stack makes."""
    iam, batch = _client("iam"), _client("batch")
    role = iam.create_role(RoleName=f"{name}-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName=f"{name}-instance")["InstanceProfile"]["Arn"]
    resources: dict[str, Any] = {
        "type": kind,
        "minvCpus": 0,
        "maxvCpus": max_vcpus,
        "instanceTypes": [INSTANCE_TYPE],
        "subnets": [subnet],
        "securityGroupIds": [group],
        "instanceRole": profile,
    }
    if kind == "SPOT":
        resources.update(bidPercentage=100, spotIamFleetRole=role)
    env = batch.create_compute_environment(
        computeEnvironmentName=name, type="MANAGED", state="ENABLED", computeResources=resources, serviceRole=role
    )
    return env["computeEnvironmentArn"]


def _queue(name: str, environment: str, state: str = "ENABLED") -> None:
    _client("batch").create_job_queue(
        jobQueueName=name,
        state=state,
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": environment}],
    )


def _group(ec2: Any, vpc: str, name: str, *, self_rules: bool) -> str:
    group = ec2.create_security_group(GroupName=name, Description=name, VpcId=vpc)["GroupId"]
    if self_rules:  # what the base stack's NodeSecurityGroupSelfIngress/Egress add
        rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
        ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=rule)
        ec2.authorize_security_group_egress(GroupId=group, IpPermissions=rule)
    return group


def _image() -> str:
    """An image pushed to the repository; its digest, as ECR computes it."""
    ecr = _client("ecr")
    ecr.create_repository(repositoryName=REPOSITORY)
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 2, "digest": _sha(b"{}")},
            "layers": [],
        }
    )
    image = ecr.put_image(repositoryName=REPOSITORY, imageManifest=manifest, imageTag="v1")["image"]
    return image["imageId"]["imageDigest"]


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="package")
def deployment(moto_server: str) -> Iterator[Deployment]:
    with pytest.MonkeyPatch.context() as patch:
        requests.post(f"{moto_server}/moto-api/reset", timeout=10).raise_for_status()
        requests.post(
            f"{moto_server}/moto-api/config", json={"batch": {"use_docker": False}}, timeout=10
        ).raise_for_status()
        conn = {
            "conn_type": "aws",
            "login": "testing",
            "password": "testing",
            "extra": {"endpoint_url": moto_server, "region_name": MOTO_REGION},
        }
        patch.setenv(f"AIRFLOW_CONN_{AWS_CONN_ID.upper()}", json.dumps(conn))
        for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
            patch.delenv(var, raising=False)
        set_ec2_quotas(patch, trn_quota(TRN_QUOTA_VCPUS))

        ec2, iam, ecs = _client("ec2"), _client("iam"), _client("ecs")
        vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
        subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.0.0/24")["Subnet"]["SubnetId"]
        efa_group = _group(ec2, vpc, "trainium-nodes", self_rules=True)
        open_group = _group(ec2, vpc, "no-self-rules", self_rules=False)
        _client("s3").create_bucket(Bucket="preflight-artifacts")

        asg = f"arn:aws:autoscaling:{MOTO_REGION}:{ACCOUNT}:autoScalingGroup:1:autoScalingGroupName/trn"
        ecs.create_capacity_provider(name="trainium-trn", autoScalingGroupProvider={"autoScalingGroupArn": asg})
        ecs.create_cluster(clusterName="trainium", capacityProviders=["trainium-trn"])
        ecs.create_cluster(clusterName="empty")

        on_demand = _environment("trn-on-demand", subnet, efa_group)
        _queue("trn-queue", on_demand)
        _queue("trn-disabled", on_demand, state="DISABLED")
        _queue("trn-spot", _environment("trn-spot", subnet, efa_group, kind="SPOT"))
        _queue("trn-small", _environment("trn-small", subnet, efa_group, max_vcpus=128))

        roles = {
            name: iam.create_role(RoleName=name, AssumeRolePolicyDocument="{}")["Role"]["Arn"]
            for name in ("trainium-job", "trainium-execution")
        }
        yield Deployment(
            subnet=subnet,
            efa_group=efa_group,
            open_group=open_group,
            job_role=roles["trainium-job"],
            execution_role=roles["trainium-execution"],
            digest=_image(),
        )
