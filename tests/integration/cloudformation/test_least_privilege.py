"""Least privilege, read from the rendered base template: who may write the registry, what the job role keeps,
and what the Airflow principal's published policy allows (scoped PassRole)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.compute.local.job_credentials import PROTECTED_PREFIXES

#: Where jobs write, found in the DAGs and operators: run outputs, checkpoints, the compile cache, data, llama/*.
JOB_PREFIXES = ("runs", "checkpoints", "compile-cache", "data", "llama")
#: Written by the Airflow principal only: the prefixes a local job's scoped session is denied as well.
AIRFLOW_ONLY_PREFIXES = PROTECTED_PREFIXES


@pytest.fixture
def base(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return templates["base"]


def statements(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["Sid"]: s for s in document["Statement"]}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def object_arn(prefix: str) -> dict[str, str]:
    return {"Fn::Sub": "${ArtifactBucket.Arn}/${ArtifactPrefix}/" + prefix + "/*"}


def test_bucket_policy_denies_the_job_role_any_write_to_airflows_prefixes(base):
    policy = base["Resources"]["ArtifactBucketPolicy"]["Properties"]["PolicyDocument"]
    deny = statements(policy)["DenyJobRoleWritesToAirflowPrefixes"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == "*"
    assert deny["Condition"] == {"ArnEquals": {"aws:PrincipalArn": {"Fn::GetAtt": ["JobRole", "Arn"]}}}
    assert {"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"} <= set(deny["Action"])
    assert deny["Resource"] == [object_arn(p) for p in AIRFLOW_ONLY_PREFIXES]


def test_job_role_reads_the_prefix_writes_only_job_prefixes_and_keeps_nothing_else(base):
    role = base["Resources"]["JobRole"]["Properties"]
    assert "ManagedPolicyArns" not in role
    found = {sid: s for p in role["Policies"] for sid, s in statements(p["PolicyDocument"]).items()}
    actions = {a for s in found.values() for a in as_list(s["Action"])}
    assert not {a for a in actions if not a.startswith("s3:")}, "image pulls and logs are the execution role's"
    assert found["ReadTheArtifactPrefix"]["Resource"] == {"Fn::Sub": "${ArtifactBucket.Arn}/${ArtifactPrefix}/*"}
    writes = [
        s
        for s in found.values()
        if s["Effect"] == "Allow" and {"s3:PutObject", "s3:DeleteObject"} & set(as_list(s["Action"]))
    ]
    assert len(writes) == 1
    assert writes[0]["Resource"] == [object_arn(p) for p in JOB_PREFIXES]
    assert not set(AIRFLOW_ONLY_PREFIXES) & set(JOB_PREFIXES)


def test_airflow_policy_passes_only_the_stack_roles_and_only_to_ecs_tasks(base):
    policy = base["Resources"]["AirflowPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    found = statements(policy["Properties"]["PolicyDocument"])
    passes = [s for s in found.values() if "iam:PassRole" in as_list(s["Action"])]
    assert len(passes) == 1
    (pass_role,) = passes
    assert pass_role["Resource"] == [{"Fn::GetAtt": ["JobRole", "Arn"]}, {"Fn::GetAtt": ["EcsExecutionRole", "Arn"]}]
    services = pass_role["Condition"]["StringEquals"]["iam:PassedToService"]
    assert "ecs-tasks.amazonaws.com" in services
    assert all(not a.startswith("iam:") or a == "iam:PassRole" for s in found.values() for a in as_list(s["Action"]))
    assert base["Outputs"]["AirflowPolicyArn"]["Value"] == {"Ref": "AirflowPolicy"}


def test_airflow_policy_scopes_every_statement_it_can(base):
    found = statements(base["Resources"]["AirflowPolicy"]["Properties"]["PolicyDocument"])
    unscoped = {sid for sid, s in found.items() if s["Resource"] == "*"}
    # Only calls IAM offers no resource type for (registration, describes, lists, registry login).
    assert unscoped == {
        "EcsCallsWithoutResourceScope",
        "BatchReadsWithoutResourceScope",
        "CapacityReadsWithoutResourceScope",
        "RegistryLoginHasNoResourceScope",
    }
    run = found["EcsRunOwnTaskDefinitions"]["Resource"]["Fn::Sub"]
    assert run.endswith(":task-definition/trainium-*")
    submit = [r["Fn::Sub"] for r in found["BatchRegisterAndSubmitOwnDefinitions"]["Resource"]]
    assert any(r.endswith(":job-definition/trainium-*") for r in submit)
    assert all(a.startswith(("ecs:Describe", "ecs:List", "batch:Describe", "batch:List", "ecs:Register"))
               for sid in unscoped - {"RegistryLoginHasNoResourceScope", "CapacityReadsWithoutResourceScope"}
               for a in found[sid]["Action"])  # fmt: skip
    assert found["CapacityReadsWithoutResourceScope"]["Action"] == [
        "servicequotas:GetServiceQuota", "servicequotas:ListAWSDefaultServiceQuotas", "cloudwatch:GetMetricStatistics"
    ]  # fmt: skip


SECRET_ARNS = (
    "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf,"
    "arn:aws:ssm:us-east-1:123456789012:parameter/team/wandb"
)
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_the_execution_role_reads_exactly_the_task_secrets_and_nothing_when_there_are_none(base):
    secrets = base["Resources"]["EcsExecutionRoleSecrets"]
    assert secrets["Type"] == "AWS::IAM::Policy" and secrets["Condition"] == "HasTaskSecrets"
    assert secrets["Properties"]["Roles"] == [{"Ref": "EcsExecutionRole"}]
    read, decrypt = secrets["Properties"]["PolicyDocument"]["Statement"]
    assert read["Action"] == ["secretsmanager:GetSecretValue", "ssm:GetParameters"]
    assert read["Resource"] == {"Ref": "TaskSecretArns"}
    assert decrypt == {
        "Fn::If": [
            "HasTaskSecretKmsKeys",
            {"Sid": "DecryptTheJobSecrets", "Effect": "Allow", "Action": "kms:Decrypt",
             "Resource": {"Ref": "TaskSecretKmsKeyArns"}},
            {"Ref": "AWS::NoValue"},
        ]
    }  # fmt: skip
    empty = {"Fn::Not": [{"Fn::Equals": [{"Fn::Join": ["", {"Ref": "TaskSecretArns"}]}, ""]}]}
    assert base["Conditions"]["HasTaskSecrets"] == empty
    # the role's own policy grants no secret, whatever the parameters
    role = base["Resources"]["EcsExecutionRole"]["Properties"]
    actions = {a for p in role["Policies"] for s in p["PolicyDocument"]["Statement"] for a in as_list(s["Action"])}
    assert not {a for a in actions if a.startswith(("secretsmanager:", "ssm:", "kms:"))}


def execution_role_policies(aws_conn_id: str, outputs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The inline policies of a deployed base stack's execution role (from its outputs), name -> document."""
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    iam = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="iam").conn
    name = outputs["EcsExecutionRoleArn"].rsplit("/", 1)[-1]
    return {
        policy: iam.get_role_policy(RoleName=name, PolicyName=policy)["PolicyDocument"]
        for policy in iam.list_role_policies(RoleName=name)["PolicyNames"]
    }


def test_deployed_the_secrets_parameter_grants_those_arns_and_its_default_grants_none(aws_conn_id):
    from tests.integration.cloudformation.conftest import TRN_ZONES, deploy

    plain = deploy(aws_conn_id, "trn-plain", "base", AvailabilityZones=TRN_ZONES)
    granted = deploy(aws_conn_id, "trn-secrets", "base", AvailabilityZones=TRN_ZONES, TaskSecretArns=SECRET_ARNS,
           TaskSecretKmsKeyArns=KMS_KEY, VpcCidr="10.43.0.0/16", PublicSubnetCidr="10.43.0.0/24",
           PrivateSubnet1Cidr="10.43.32.0/19", PrivateSubnet2Cidr="10.43.64.0/19",
           RepositoryName="airflow-trainium/secrets")  # fmt: skip

    assert "read-job-secrets" not in execution_role_policies(aws_conn_id, plain)
    document = execution_role_policies(aws_conn_id, granted)["read-job-secrets"]
    statements_by_sid = {s["Sid"]: s for s in document["Statement"]}
    assert statements_by_sid["ReadTheJobSecrets"]["Resource"] == SECRET_ARNS.split(",")
    assert statements_by_sid["DecryptTheJobSecrets"]["Resource"] == [KMS_KEY]
