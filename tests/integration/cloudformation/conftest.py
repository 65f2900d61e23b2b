"""Templates of cloudformation/ loaded as CloudFormation reads them, and the base stack deployed to moto."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

TEMPLATE_DIR = Path(__file__).resolve().parents[3] / "cloudformation"
TEMPLATES = ("base", "ecs", "batch")
TRN_ZONES = "us-east-1a,us-east-1b"


def template_path(name: str) -> Path:
    return TEMPLATE_DIR / f"{name}.yaml"


def load_template(name: str) -> dict[str, Any]:
    """The template as a dict, short-form tags (!Ref, !Sub) decoded as CloudFormation does."""
    from cfnlint.decode import cfn_yaml

    return cfn_yaml.load(str(template_path(name)))


def substitute(text: str, **values: str) -> str:
    """``text`` as CloudFormation's Fn::Sub renders it: ``${Name}`` replaced (an unknown name is an error, as
    there), ``${!Literal}`` left as ``${Literal}``."""

    def one(match: re.Match[str]) -> str:
        name = match[1]
        return "${" + name[1:] + "}" if name.startswith("!") else values[name]

    return re.sub(r"\$\{([^}]*)\}", one, text)


@pytest.fixture(scope="session")
def templates() -> dict[str, dict[str, Any]]:
    return {name: load_template(name) for name in TEMPLATES}


def deploy(aws_conn_id: str, stack: str, template: str, **parameters: str) -> dict[str, str]:
    """Create a stack on the moto server through the amazon provider's hook; returns its outputs."""
    from airflow.providers.amazon.aws.hooks.cloud_formation import CloudFormationHook

    hook = CloudFormationHook(aws_conn_id=aws_conn_id)
    hook.create_stack(
        stack,
        {
            "TemplateBody": template_path(template).read_text(),
            "Parameters": [{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
            "Capabilities": ["CAPABILITY_IAM"],
        },
    )
    assert hook.get_stack_status(stack) == "CREATE_COMPLETE"
    described = hook.get_conn().describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


@pytest.fixture
def base_stack(aws_conn_id: str) -> str:
    """The base template deployed on moto (it skips AWS::S3::BucketPolicy and AWS::EC2::SecurityGroupEgress,
    which its CloudFormation does not implement)."""
    deploy(aws_conn_id, "trn-base", "base", AvailabilityZones=TRN_ZONES)
    return "trn-base"
