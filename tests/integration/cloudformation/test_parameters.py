"""Bad parameter values are refused by the templates' own constraints: cfn-lint's rule E2900 checks the
values of a deployment against each parameter's AllowedValues and required-ness, as CloudFormation does when a
stack is created. (moto's CloudFormation does not check parameter constraints at all.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.cloudformation.conftest import template_path

BASE = {"AvailabilityZones": ["us-east-1a", "us-east-1b"]}
STACKS = {"BaseStackName": "trn-base"}

GOOD: dict[str, list[dict[str, Any]]] = {
    "base": [
        BASE,
        {**BASE, "LogRetentionDays": 365, "ArtifactPrefix": "team-a"},
        {
            **BASE,
            "TaskSecretArns": [
                "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf",
                "arn:aws:ssm:us-east-1:123456789012:parameter/team/wandb",
            ],
            "TaskSecretKmsKeyArns": ["arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"],
        },
    ],
    "ecs": [
        STACKS,
        {**STACKS, "InstanceType": "trn1.32xlarge", "MaxInstances": 8},
        {**STACKS, "InstanceType": "trn2.48xlarge", "NeuronDriverVersion": "2.31.7.0"},
    ],
    "batch": [
        STACKS,
        {**STACKS, "EnableTrn2": "enabled", "MaxNodes": 16},
        {**STACKS, "MaxNodes": 1, "PurchaseOption": "spot"},
        # A Trn2 queue for the XLA image: its driver, not the native one.
        {**STACKS, "EnableTrn2": "enabled", "NativeNeuronDriverVersion": "2.26.5.0"},
    ],
}

# (parameters, what the refusal says); every message names the bad value, which ties it to its case.
BAD: dict[str, list[tuple[dict[str, Any], str]]] = {
    "base": [
        ({**BASE, "LogRetentionDays": 0}, "0 is not one of"),
        ({"LogRetentionDays": 30}, "'AvailabilityZones' is a required property"),
    ],
    "ecs": [
        ({**STACKS, "InstanceType": "p4d.24xlarge"}, "'p4d.24xlarge' is not one of"),
        ({**STACKS, "InstanceType": "inf2.xlarge"}, "'inf2.xlarge' is not one of"),
        ({**STACKS, "InstanceType": "trn1n.32xlarge"}, "'trn1n.32xlarge' is not one of"),
        # Not launchable yet: botocore's EC2 model lists no trn3 type (test_templates.py).
        ({**STACKS, "InstanceType": "trn3.48xlarge"}, "'trn3.48xlarge' is not one of"),
        ({**STACKS, "MaxInstances": 0}, "0 is not one of"),
    ],
    "batch": [
        ({**STACKS, "MaxNodes": 0}, "0 is not one of"),
        ({**STACKS, "PurchaseOption": "reserved"}, "'reserved' is not one of"),
        ({**STACKS, "EnableTrn2": "true"}, "'true' is not one of"),
        ({**STACKS, "PlacementSubnet": "3"}, "'3' is not one of"),
        ({"MaxNodes": 4}, "'BaseStackName' is a required property"),
    ],
}


def lint(template: str, parameter_sets: list[dict[str, Any]]) -> list[str]:
    """One cfn-lint run of a template against several deployments' parameter values."""
    from cfnlint.api import lint_by_config
    from cfnlint.config import ManualArgs

    matches = lint_by_config(ManualArgs(templates=[str(template_path(template))], parameters=parameter_sets))
    return [f"{m.rule.id} {m.message}" for m in matches]


@pytest.mark.parametrize("template", sorted(GOOD))
def test_good_values_are_accepted(template: str) -> None:
    assert lint(template, GOOD[template]) == []


@pytest.mark.parametrize("template", sorted(BAD))
def test_bad_values_are_refused(template: str) -> None:
    found = [m for m in lint(template, [params for params, _ in BAD[template]]) if m.startswith("E2900")]
    for params, refused in BAD[template]:
        assert any(refused in message for message in found), (params, found)
    assert len(found) >= len(BAD[template])


# cfn-lint checks no AllowedPattern of a list parameter; CloudFormation matches it against each value of a
# CommaDelimitedList (AWS CloudFormation User Guide, "Parameters syntax", AllowedPattern).
SECRET_PATTERNS = {
    "TaskSecretArns": (
        [
            "",  # the default: no secrets
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-??????",
            "arn:aws:ssm:eu-west-1:123456789012:parameter/team/wandb",
            "arn:aws-cn:ssm:cn-north-1:123456789012:parameter/x",
        ],
        [
            "hf_abcdefghijklmnop",  # a value where its ARN belongs
            "*",
            "arn:aws:secretsmanager:*:*:secret:*",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:*",  # every secret of the account
            "arn:aws:ssm:us-east-1:123456789012:parameter/*",
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:hf/token-AbCdEf:token::",  # ECS's suffix
            "ssm:/team/wandb",  # the reference form: the stack needs the ARN
            "arn:aws:s3:::bucket/key",
        ],
    ),
    "TaskSecretKmsKeyArns": (
        ["", "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"],
        ["alias/aws/secretsmanager", "arn:aws:kms:us-east-1:123456789012:alias/x", "*"],
    ),
}


@pytest.mark.parametrize("parameter", sorted(SECRET_PATTERNS))
def test_secret_parameters_take_only_arns_of_their_kind(templates: dict[str, Any], parameter: str) -> None:
    import re

    declared = templates["base"]["Parameters"][parameter]
    assert declared["Type"] == "CommaDelimitedList" and declared["Default"] == ""
    good, bad = SECRET_PATTERNS[parameter]
    assert [v for v in good if not re.fullmatch(declared["AllowedPattern"], v)] == []
    assert [v for v in bad if re.fullmatch(declared["AllowedPattern"], v)] == []
