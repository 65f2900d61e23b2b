"""``airflow-trainium configure`` against stacks deployed on moto, writing to the real metadata DB."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium import cli
from airflow_provider_trainium.compute.backends import resolve_compute
from airflow_provider_trainium.hooks.trainium import TrainiumConfig
from airflow_provider_trainium.neuron.releases import table
from tests.integration.cloudformation.conftest import deploy, load_template

CONN_ID = "trainium_cfn_test"


def run_command(*argv: str) -> str:
    """Run a subcommand in this process as the console script would, minus its logging setup; its output."""
    args = cli.build_parser().parse_args(argv)
    out = io.StringIO()
    assert args.func(args, out) == 0
    return out.getvalue()


def stored_connection(conn_id: str) -> Any:
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.scalars(select(Connection).where(Connection.conn_id == conn_id)).all()
        for row in rows:
            session.expunge(row)
    assert len(rows) <= 1
    return rows[0] if rows else None


@pytest.fixture
def conn_id() -> Iterator[str]:
    """A connection id no other test uses, removed from the metadata DB afterwards."""
    from airflow.models import Connection
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    def drop() -> None:
        with create_session() as session:
            session.execute(delete(Connection).where(Connection.conn_id == CONN_ID))

    drop()
    yield CONN_ID
    drop()


def deploy_batch_outputs(aws_conn_id: str, stack: str, **parameters: str) -> dict[str, str]:
    """The Batch template's parameters, conditions and outputs on moto, its job queues as SQS queues: moto's
    CloudFormation cannot create the compute environments (it requires a ServiceRole the template leaves to
    Batch's service-linked role), and configure reads only the outputs."""
    from airflow.providers.amazon.aws.hooks.cloud_formation import CloudFormationHook

    batch = load_template("batch")
    queues = {name: res for name, res in batch["Resources"].items() if res["Type"] == "AWS::Batch::JobQueue"}
    template = {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Parameters": {k: v for k, v in batch["Parameters"].items() if not k.startswith("NeuronAmi")},
        "Conditions": batch["Conditions"],
        "Resources": {name: {"Type": "AWS::SQS::Queue", "Condition": res["Condition"]} for name, res in queues.items()},
        "Outputs": batch["Outputs"],
    }
    hook = CloudFormationHook(aws_conn_id=aws_conn_id)
    body = json.dumps(template, default=str)
    hook.create_stack(
        stack,
        {"TemplateBody": body, "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()]},
    )
    assert hook.get_stack_status(stack) == "CREATE_COMPLETE"
    described = hook.get_conn().describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def physical_id(aws_conn_id: str, stack: str, logical_id: str) -> str:
    from airflow.providers.amazon.aws.hooks.cloud_formation import CloudFormationHook

    conn = CloudFormationHook(aws_conn_id=aws_conn_id).get_conn()
    summaries = conn.list_stack_resources(StackName=stack)["StackResourceSummaries"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in summaries}[logical_id]


def assert_points_at_base_stack(config: TrainiumConfig, aws_conn_id: str, stack: str) -> None:
    """Each field names a resource that exists in its own service, found without the stack's outputs."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook
    from airflow.providers.amazon.aws.hooks.ec2 import EC2Hook
    from airflow.providers.amazon.aws.hooks.ecr import EcrHook
    from airflow.providers.amazon.aws.hooks.logs import AwsLogsHook
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    assert config.configured
    assert config.aws_conn_id == aws_conn_id
    assert config.region_name == "us-east-1"

    bucket = physical_id(aws_conn_id, stack, "ArtifactBucket")
    assert config.artifact_root == f"s3://{bucket}/trainium"
    assert S3Hook(aws_conn_id=aws_conn_id).check_for_bucket(bucket)

    ec2 = EC2Hook(aws_conn_id=aws_conn_id, api_type="client_type").conn
    vpc = physical_id(aws_conn_id, stack, "Vpc")
    expected_subnets = [physical_id(aws_conn_id, stack, f"PrivateSubnet{i}") for i in (1, 2)]
    assert list(config.subnets) == expected_subnets
    described = ec2.describe_subnets(SubnetIds=list(config.subnets))["Subnets"]
    assert {s["VpcId"] for s in described} == {vpc}
    assert sorted(s["AvailabilityZone"] for s in described) == ["us-east-1a", "us-east-1b"]
    assert not any(s["MapPublicIpOnLaunch"] for s in described)

    (group,) = ec2.describe_security_groups(GroupIds=list(config.security_groups))["SecurityGroups"]
    assert group["VpcId"] == vpc
    assert [p["UserIdGroupPairs"][0]["GroupId"] for p in group["IpPermissions"]] == [group["GroupId"]]
    assert not any(r.get("CidrIp") for p in group["IpPermissions"] for r in p.get("IpRanges", []))

    iam = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="iam").conn
    for arn, logical in (
        (config.job_role_arn, "JobRole"),
        (config.ecs_execution_role_arn, "EcsExecutionRole"),
    ):
        role = iam.get_role(RoleName=physical_id(aws_conn_id, stack, logical))["Role"]
        assert role["Arn"] == arn

    (repo,) = EcrHook(aws_conn_id=aws_conn_id).conn.describe_repositories(
        repositoryNames=[physical_id(aws_conn_id, stack, "Repository")]
    )["repositories"]
    assert config.ecr_repository == repo["repositoryUri"]
    assert repo["imageTagMutability"] == "IMMUTABLE"

    groups = AwsLogsHook(aws_conn_id=aws_conn_id).conn.describe_log_groups(logGroupNamePrefix=config.log_group)
    (log_group,) = [g for g in groups["logGroups"] if g["logGroupName"] == config.log_group]
    assert log_group["retentionInDays"] == 90


def test_dry_run_prints_the_connection_and_writes_nothing(aws_conn_id: str, base_stack: str, conn_id: str) -> None:
    """The console script, as a user runs it: stdout is the connection as JSON and nothing else."""
    script = str(Path(sys.executable).with_name("airflow-trainium"))
    argv = [script, "configure", "--stack", base_stack, "--aws-conn-id", aws_conn_id, "--conn-id", conn_id]
    done = subprocess.run([*argv, "--dry-run"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert list(printed) == [conn_id]
    assert printed[conn_id]["conn_type"] == "trainium"
    assert "no ECS cluster and no Batch queue" in done.stderr
    assert_points_at_base_stack(TrainiumConfig.from_extra(printed[conn_id]["extra"]), aws_conn_id, base_stack)
    assert stored_connection(conn_id) is None


def test_configure_creates_then_updates_the_connection(aws_conn_id: str, base_stack: str, conn_id: str) -> None:
    from airflow.providers.amazon.aws.hooks.ecs import EcsHook

    # moto deploys the ECS stack's cluster and launch template; it has no capacity providers.
    deploy(aws_conn_id, "trn-ecs", "ecs", BaseStackName=base_stack)
    argv = ["configure", "--stack", base_stack, "--stack", "trn-ecs", "--aws-conn-id", aws_conn_id]
    argv += ["--conn-id", conn_id]

    assert run_command(*argv) == f"created connection {conn_id} from stacks {base_stack}, trn-ecs\n"
    stored = stored_connection(conn_id)
    assert stored.conn_type == "trainium"
    # Tasks read connections through the API server; here the row itself is what there is to read.
    config = TrainiumConfig.from_extra(stored.extra_dejson)
    assert_points_at_base_stack(config, aws_conn_id, base_stack)
    (cluster,) = EcsHook(aws_conn_id=aws_conn_id).conn.describe_clusters(clusters=[config.ecs_cluster])["clusters"]
    assert cluster["status"] == "ACTIVE"
    # The driver the ECS stack pins on its hosts (its NeuronDriverVersion output, the template default here),
    # for the instance type those hosts are; no connection-wide driver.
    assert config.neuron_driver_versions == {"trn1.2xlarge": table().image.driver}
    assert config.neuron_driver_version is None
    assert resolve_compute("auto", config, 1) == "ecs"

    # Running it again is an update of the same row, not a second connection.
    image = "repo@sha256:" + "0" * 64
    assert run_command(*argv, "--image", image).startswith(f"updated connection {conn_id}")
    updated = stored_connection(conn_id)
    assert updated.extra_dejson == {**stored.extra_dejson, "image": image}
    assert TrainiumConfig.from_extra(updated.extra_dejson).image == image


def test_unknown_stack_fails_clearly(aws_conn_id: str, conn_id: str) -> None:
    with pytest.raises(ValueError, match="stack nope not found in region us-east-1"):
        run_command("configure", "--stack", "nope", "--aws-conn-id", aws_conn_id, "--conn-id", conn_id)
    assert stored_connection(conn_id) is None


def test_compute_stack_without_base_stack_is_refused(aws_conn_id: str, base_stack: str, conn_id: str) -> None:
    deploy(aws_conn_id, "trn-ecs", "ecs", BaseStackName=base_stack)
    with pytest.raises(ValueError, match=r"include the base stack") as refused:
        run_command("configure", "--stack", "trn-ecs", "--aws-conn-id", aws_conn_id, "--conn-id", conn_id)
    assert "ArtifactRoot" in str(refused.value)
    assert stored_connection(conn_id) is None


def test_airflows_own_cli_writes_the_driver_the_stacks_pin(aws_conn_id: str, base_stack: str, conn_id: str) -> None:
    """``airflow trainium configure``, registered through provider info, reads the ECS stack's
    NeuronDriverVersion output into the connection's neuron_driver_versions, for its instance type."""
    deploy(aws_conn_id, "trn-ecs", "ecs", BaseStackName=base_stack)
    airflow = str(Path(sys.executable).with_name("airflow"))
    argv = [airflow, "trainium", "configure", "--stack", base_stack, "--stack", "trn-ecs"]
    argv += ["--aws-conn-id", aws_conn_id, "--conn-id", conn_id, "--dry-run"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout[done.stdout.index("{") :])
    assert printed[conn_id]["extra"]["neuron_driver_versions"] == {"trn1.2xlarge": table().image.driver}
    missing = subprocess.run([*argv[:3], "--stack", "nope", "--aws-conn-id", aws_conn_id], capture_output=True,
                             text=True, timeout=180)  # fmt: skip
    assert missing.returncode == 2 and "stack nope not found" in missing.stderr


def test_each_queue_and_cluster_gets_the_driver_its_hosts_pin(aws_conn_id: str, base_stack: str, conn_id: str) -> None:
    """A Batch stack with all three queues on its template defaults and an ECS Trn2 cluster for the native image:
    the Trn1/Trn1n queues' hosts run the XLA release's driver (NeuronDriverVersion), the Trn2 queue's and the
    ECS instances the native release's (NativeNeuronDriverVersion, and the ECS stack's own parameter), the same
    driver for trn2.48xlarge from both stacks. All three queues, as moto renders a disabled queue's
    AWS::NoValue in BatchJobQueues' Fn::Join as "None"."""
    xla, native = table().image_for("xla"), table().image_for("native")
    deploy(aws_conn_id, "trn-ecs", "ecs", BaseStackName=base_stack, InstanceType="trn2.48xlarge",
           NeuronDriverVersion=native.driver)  # fmt: skip
    enabled = {f"Enable{p}": "enabled" for p in ("Trn1", "Trn1n", "Trn2")}
    outputs = deploy_batch_outputs(aws_conn_id, "trn-batch", BaseStackName=base_stack, **enabled)
    assert (outputs["NeuronDriverVersion"], outputs["NativeNeuronDriverVersion"]) == (xla.driver, native.driver)
    argv = ["configure", "--stack", base_stack, "--stack", "trn-ecs", "--stack", "trn-batch", "--dry-run"]
    printed = json.loads(run_command(*argv, "--aws-conn-id", aws_conn_id, "--conn-id", conn_id))
    config = TrainiumConfig.from_extra(printed[conn_id]["extra"])
    assert config.neuron_driver_versions == {
        "trn1.32xlarge": xla.driver,
        "trn1n.32xlarge": xla.driver,
        "trn2.48xlarge": native.driver,
    }
    assert config.neuron_driver_version is None
    assert config.neuron_driver_for("trn1.32xlarge") == xla.driver
    assert config.neuron_driver_for("trn2.48xlarge") == native.driver
    assert stored_connection(conn_id) is None
