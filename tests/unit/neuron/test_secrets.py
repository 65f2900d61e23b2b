"""Secret references: what counts as one, how ECS and Batch definitions carry them, what a spec refuses."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.validate import validate_parameters

from airflow_provider_trainium.compute.batch import definitions as batch_defs
from airflow_provider_trainium.compute.ecs import definitions as ecs_defs
from airflow_provider_trainium.compute.ecs.definitions import EcsDefinitionError, EcsTaskSettings, task_definition
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.secrets import (
    SecretLocation,
    container_secrets,
    reference_problem,
    secret_location,
    value_from,
)
from airflow_provider_trainium.neuron.spec import JobSpec, JobSpecError

SM_ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf"
SSM_ARN = "arn:aws:ssm:eu-west-1:123456789012:parameter/team/hf-token"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/trainium@sha256:" + "ab" * 32
EXECUTION_ROLE = "arn:aws:iam::123456789012:role/trainium-execution"
ECS_SETTINGS = EcsTaskSettings(IMAGE, "/trainium/jobs", "us-east-1", EXECUTION_ROLE, None)
BATCH_SETTINGS = batch_defs.BatchSettings(region_name="us-east-1", execution_role_arn=EXECUTION_ROLE)
SECRETS = {"HF_TOKEN": SM_ARN, "WANDB_API_KEY": "ssm:/team/wandb"}
RENDERED = [
    {"name": "HF_TOKEN", "valueFrom": SM_ARN},
    {"name": "WANDB_API_KEY", "valueFrom": "/team/wandb"},
]


def spec(**changes) -> JobSpec:
    values = {"name": "train", "command": ("python", "train.py"), "image": IMAGE, "secrets": dict(SECRETS)}
    return JobSpec(**{**values, **changes})


def input_shape(service: str, operation: str):
    return botocore.session.get_session().get_service_model(service).operation_model(operation).input_shape


@pytest.mark.parametrize(
    ("reference", "location"),
    [
        (SM_ARN, SecretLocation("secretsmanager", SM_ARN, "us-east-1")),
        (f"{SM_ARN}:token::", SecretLocation("secretsmanager", SM_ARN, "us-east-1", json_key="token")),
        (
            f"{SM_ARN}:token:AWSPREVIOUS:",
            SecretLocation("secretsmanager", SM_ARN, "us-east-1", json_key="token", version_stage="AWSPREVIOUS"),
        ),
        (f"{SM_ARN}:::v-1", SecretLocation("secretsmanager", SM_ARN, "us-east-1", version_id="v-1")),
        ("arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:x-AbCdEf",
         SecretLocation("secretsmanager", "arn:aws-cn:secretsmanager:cn-north-1:123456789012:secret:x-AbCdEf",
                        "cn-north-1")),
        (SSM_ARN, SecretLocation("ssm", SSM_ARN, "eu-west-1")),
        ("ssm:/team/hf-token", SecretLocation("ssm", "/team/hf-token")),
        ("ssm:hf-token", SecretLocation("ssm", "hf-token")),
    ],
)  # fmt: skip
def test_references_parse_as_the_ecs_agent_reads_them(reference, location):
    assert reference_problem(reference) is None
    assert secret_location(reference) == location


@pytest.mark.parametrize(
    "given",
    [
        "hf_abcdefghijklmnopqrstuvwxyz0123",  # a token pasted where its reference belongs
        "s3cr3t-value",
        "arn:aws:secretsmanager:us-east-1:1234:secret:short-account",
        f"{SM_ARN}:key:stage:id:one-too-many",
        "arn:aws:ssm:us-east-1:123456789012:document/not-a-parameter",
        "ssm:",
        "ssm:/a//b",
        "",
    ],
)
def test_anything_else_is_refused_without_repeating_it(given):
    problem = reference_problem(given)
    assert problem is not None and "never values" in problem
    if len(given) > 8:
        assert given not in problem  # it may be the value itself
    with pytest.raises(ValueError, match="is not a Secrets Manager ARN"):
        secret_location(given)


def test_a_non_string_is_refused():
    assert reference_problem(42) == "a secret reference must be a string, got int"  # type: ignore[arg-type]


def test_value_from_is_the_arn_or_the_parameter_name():
    assert value_from(SM_ARN) == SM_ARN
    assert value_from(f"{SM_ARN}:token::") == f"{SM_ARN}:token::"  # ECS reads the suffix itself
    assert value_from(SSM_ARN) == SSM_ARN
    assert value_from("ssm:/team/hf-token") == "/team/hf-token"
    assert value_from("ssm:hf-token") == "hf-token"
    assert container_secrets(SECRETS) == RENDERED
    assert container_secrets({}) == []


def test_a_spec_refuses_a_value_a_denied_name_and_a_clash_with_env():
    token = "hf_abcdefghijklmnopqrstuvwxyz0123"
    with pytest.raises(JobSpecError) as refused:
        spec(secrets={"HF_TOKEN": token}).validate()
    assert "the reference of secret HF_TOKEN is not a Secrets Manager ARN" in str(refused.value)
    assert token not in str(refused.value)

    with pytest.raises(JobSpecError, match="secret env name 'AWS_SECRET_ACCESS_KEY' is not allowed"):
        spec(secrets={"AWS_SECRET_ACCESS_KEY": SM_ARN}).validate()
    with pytest.raises(JobSpecError, match="secret env name 'TRAINIUM_OUTPUT_DIR' is set by the backend"):
        spec(secrets={"TRAINIUM_OUTPUT_DIR": SM_ARN}).validate()
    with pytest.raises(JobSpecError, match="secrets and env both set HF_TOKEN"):
        spec(env={"HF_TOKEN": "x"}).validate()
    assert spec().validate().secrets == SECRETS


def test_secrets_change_the_spec_hash_and_round_trip():
    assert spec().content_hash() != spec(secrets={}).content_hash()
    assert "secrets" not in spec(secrets={}).to_dict()  # an older spec keeps its hash
    assert JobSpec.from_dict(spec().to_dict()) == spec()


def test_the_ecs_task_definition_carries_the_references_and_no_value():
    definition = task_definition(container_plan(spec()), ECS_SETTINGS)
    validate_parameters(definition, input_shape("ecs", "RegisterTaskDefinition"))
    (container,) = definition["containerDefinitions"]
    assert container["secrets"] == RENDERED
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & {e["name"] for e in container["environment"]}
    overrides = ecs_defs.container_overrides(container_plan(spec()))
    assert "secrets" not in overrides["containerOverrides"][0]  # RunTask overrides cannot carry them
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & {e["name"] for e in overrides["containerOverrides"][0]["environment"]}


def test_another_secret_set_is_another_ecs_family_and_none_adds_no_field():
    family = task_definition(container_plan(spec()), ECS_SETTINGS)["family"]
    assert task_definition(container_plan(spec()), ECS_SETTINGS)["family"] == family  # reused
    other = task_definition(container_plan(spec(secrets={"HF_TOKEN": SSM_ARN})), ECS_SETTINGS)
    assert other["family"] != family
    bare = task_definition(container_plan(spec(secrets={})), ECS_SETTINGS)
    assert "secrets" not in bare["containerDefinitions"][0] and bare["family"] not in (family, other["family"])


def test_ecs_refuses_secrets_without_an_execution_role():
    settings = EcsTaskSettings(IMAGE, "/trainium/jobs", "us-east-1", None, None)
    with pytest.raises(EcsDefinitionError, match=r"secrets \(HF_TOKEN, WANDB_API_KEY\).*ecs_execution_role_arn"):
        task_definition(container_plan(spec()), settings)
    assert task_definition(container_plan(spec(secrets={})), settings)["family"]


def test_batch_single_node_definition_carries_the_references():
    definition = batch_defs.build_job_definition(container_plan(spec(instance_type="trn1.2xlarge")), BATCH_SETTINGS)
    validate_parameters(definition, input_shape("batch", "RegisterJobDefinition"))
    props = definition["containerProperties"]
    assert props["secrets"] == RENDERED
    assert not {"HF_TOKEN", "WANDB_API_KEY"} & {e["name"] for e in props["environment"]}


def test_batch_multi_node_definition_carries_them_on_every_node_range():
    plan = container_plan(spec(instance_type="trn1.32xlarge", nodes=2))
    definition = batch_defs.build_job_definition(plan, BATCH_SETTINGS)
    validate_parameters(definition, input_shape("batch", "RegisterJobDefinition"))
    ranges = definition["nodeProperties"]["nodeRangeProperties"]
    assert ranges and all(r["container"]["secrets"] == RENDERED for r in ranges)
    request = batch_defs.submit_request(plan, job_name="j", job_queue="q", job_definition="d", tags={})
    assert "secrets" not in request["nodeOverrides"]["nodePropertyOverrides"][0]["containerOverrides"]


def test_another_secret_set_is_another_batch_definition():
    def name(**changes) -> str:
        plan = container_plan(spec(instance_type="trn1.32xlarge", nodes=2, **changes))
        return batch_defs.build_job_definition(plan, BATCH_SETTINGS)["jobDefinitionName"]

    assert name() == name()
    assert name(secrets={"HF_TOKEN": SSM_ARN}) != name()
    assert name(secrets={}) != name()


def test_batch_refuses_secrets_without_an_execution_role():
    plan = container_plan(spec(instance_type="trn1.2xlarge"))
    with pytest.raises(batch_defs.BatchDefinitionError, match="no ecs_execution_role_arn"):
        batch_defs.build_job_definition(plan, batch_defs.BatchSettings(region_name="us-east-1"))
