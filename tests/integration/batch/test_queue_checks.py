"""What Batch would accept but never run, refused before SubmitJob: multi-node on Spot, a layout above the vCPU
quota or every compute environment's maxvCpus, files on this host."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.compute.batch.backend import BatchInputError
from airflow_provider_trainium.neuron.spec import JobSpec
from tests.integration.batch.conftest import IMAGE, CallCounter
from tests.integration.moto_quotas import set_ec2_quotas, trn_quota

TAGS = {"airflow:dag_id": "d", "airflow:task_id": "t", "airflow:run_id": "r1", "airflow:map_index": "-1"}


def spec(nodes: int, **changes: Any) -> JobSpec:
    values: dict[str, Any] = {
        "name": "train",
        "entry_point": "trainium_trainer.allreduce",
        "instance_type": "trn1.32xlarge",
        "nodes": nodes,
        "image": IMAGE,
        "output_uri": "s3://bucket/runs/1",
        "timeout_seconds": 3600,
    }
    values.update(changes)
    return JobSpec(**values).validate()


def managed_queue(batch_env: Any, aws_conn_id: str, name: str, resource_type: str, max_vcpus: int = 512) -> str:
    """A managed compute environment of ``resource_type`` (EC2 or SPOT) and a queue on it, as the stack makes."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    ec2 = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="ec2").conn
    iam = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="iam").conn
    vpc = ec2.create_vpc(CidrBlock="10.1.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.1.0.0/24")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName=name, Description="nodes", VpcId=vpc)["GroupId"]
    role = iam.create_role(RoleName=f"{name}-instance", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    profile = iam.create_instance_profile(InstanceProfileName=f"{name}-instance")["InstanceProfile"]["Arn"]
    iam.add_role_to_instance_profile(InstanceProfileName=f"{name}-instance", RoleName=f"{name}-instance")
    resources: dict[str, Any] = {
        "type": resource_type,
        "minvCpus": 0,
        "maxvCpus": max_vcpus,
        "instanceTypes": ["trn1.32xlarge"],
        "subnets": [subnet],
        "securityGroupIds": [group],
        "instanceRole": profile,
    }
    if resource_type == "SPOT":
        resources["bidPercentage"] = 100
        resources["spotIamFleetRole"] = role
    service = iam.create_role(RoleName=f"{name}-service", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    env = batch_env.batch.create_compute_environment(
        computeEnvironmentName=f"{name}-env",
        type="MANAGED",
        state="ENABLED",
        computeResources=resources,
        serviceRole=service,
    )
    batch_env.batch.create_job_queue(
        jobQueueName=name,
        state="ENABLED",
        priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": env["computeEnvironmentArn"]}],
    )
    return name


def backend_on(batch_env: Any, queue: str, **config: Any) -> tuple[Any, CallCounter]:
    backend = batch_env.backend()
    fields = {**backend.config.__dict__, "batch_job_queues": {"trn1.32xlarge": queue}, **config}
    backend.config = backend.config.__class__(**fields)
    return backend, CallCounter().attach(backend.hook.client)


def test_multi_node_job_is_refused_on_a_spot_queue_before_submitting(batch_env, aws_conn_id):
    queue = managed_queue(batch_env, aws_conn_id, "trn-spot", "SPOT")
    backend, counter = backend_on(batch_env, queue)
    with pytest.raises(BatchInputError, match="does not run multi-node parallel jobs on Spot") as refused:
        backend.submit(spec(nodes=2), "job-a", TAGS)
    assert "trn-spot-env" in str(refused.value) and "2-node trn1.32xlarge" in str(refused.value)
    assert counter["SubmitJob"] == 0 and counter["RegisterJobDefinition"] == 0
    assert counter["DescribeJobQueues"] == 1 and counter["DescribeComputeEnvironments"] == 1


def test_single_node_job_may_use_spot_and_multi_node_goes_to_on_demand(batch_env, aws_conn_id):
    spot = managed_queue(batch_env, aws_conn_id, "trn-spot", "SPOT")
    backend, counter = backend_on(batch_env, spot)
    backend.submit(spec(nodes=1), "job-single", TAGS)
    assert counter["SubmitJob"] == 1
    on_demand = managed_queue(batch_env, aws_conn_id, "trn-ondemand", "EC2")
    backend, counter = backend_on(batch_env, on_demand)
    backend.submit(spec(nodes=2), "job-multi", TAGS)
    assert counter["SubmitJob"] == 1


def test_a_layout_above_the_trn_vcpu_quota_is_refused_before_submitting(batch_env, monkeypatch):
    set_ec2_quotas(monkeypatch, trn_quota(128))  # one trn1.32xlarge
    backend, counter = backend_on(batch_env, batch_env.queue)
    with pytest.raises(BatchInputError, match="this layout can never be placed") as refused:
        backend.submit(spec(nodes=2), "job-a", TAGS)
    assert "2 x trn1.32xlarge need 256 vCPUs" in str(refused.value)
    assert "'Running On-Demand Trn instances' (L-2C3B7624) of 128 vCPUs" in str(refused.value)
    assert counter["SubmitJob"] == 0 and counter["RegisterJobDefinition"] == 0
    backend.submit(spec(nodes=1), "job-b", TAGS)  # what the quota holds goes ahead
    assert counter["SubmitJob"] == 1


def test_a_layout_above_every_compute_environment_is_refused_before_submitting(batch_env, aws_conn_id):
    queue = managed_queue(batch_env, aws_conn_id, "trn-small", "EC2", max_vcpus=128)
    backend, counter = backend_on(batch_env, queue)
    with pytest.raises(BatchInputError, match="more than any compute environment of queue 'trn-small'") as refused:
        backend.submit(spec(nodes=2), "job-a", TAGS)
    assert "need 256 vCPUs" in str(refused.value) and "trn-small-env (maxvCpus 128)" in str(refused.value)
    assert counter["SubmitJob"] == 0


def test_a_queue_batch_does_not_know_is_named(batch_env):
    backend, counter = backend_on(batch_env, "no-such-queue")
    with pytest.raises(BatchInputError, match="AWS Batch has no job queue 'no-such-queue'"):
        backend.submit(spec(nodes=2), "job-a", TAGS)
    assert counter["SubmitJob"] == 0


UNREACHABLE = [
    ({"artifact_root": "file:///srv/airflow/trainium"}, {}, "artifact_root (trainium connection) 'file:///srv"),
    ({}, {"output_uri": "file:///home/airflow/runs/1"}, "output_uri 'file:///home/airflow/runs/1'"),
    ({}, {"checkpoint_uri": "file:///tmp/ckpt"}, "checkpoint_uri 'file:///tmp/ckpt'"),
    ({}, {"env": {"TRAINIUM_COMPILE_CACHE_URI": "/var/cache"}}, "env TRAINIUM_COMPILE_CACHE_URI '/var/cache'"),
]


def test_a_location_the_nodes_cannot_reach_fails_before_any_call(batch_env):
    for config, changes, named in UNREACHABLE:
        backend, counter = backend_on(batch_env, batch_env.queue, **config)
        with pytest.raises(BatchInputError, match="is not an s3:// URI") as refused:
            backend.submit(spec(nodes=2, **changes), "job-a", TAGS)
        assert named in str(refused.value) and "compute='batch' runs the job on AWS" in str(refused.value)
        assert counter.calls == {}


def test_an_instance_type_ec2_cannot_launch_fails_before_any_call(batch_env):
    """An announced type the EC2 API does not list yet (trn3 with this botocore) never reaches SubmitJob."""
    from airflow_provider_trainium.compute.remote import ec2_instance_types
    from airflow_provider_trainium.neuron.catalog import CATALOG

    unlaunchable = sorted(t for t in CATALOG if t not in ec2_instance_types())
    if not unlaunchable:
        pytest.skip("every catalog type is in this botocore's EC2 model")
    backend, counter = backend_on(batch_env, batch_env.queue, batch_job_queues={unlaunchable[0]: batch_env.queue})
    with pytest.raises(BatchInputError, match="EC2 cannot launch it yet"):
        backend.submit(spec(nodes=1, instance_type=unlaunchable[0], stack="native"), "job-a", TAGS)
    assert counter.calls == {}
