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
    "base": [BASE, {**BASE, "LogRetentionDays": 365, "ArtifactPrefix": "team-a"}],
    "ecs": [
        STACKS,
        {**STACKS, "InstanceType": "trn1.32xlarge", "MaxInstances": 8},
        {**STACKS, "InstanceType": "trn3.48xlarge", "NeuronDriverVersion": "2.31.7.0"},
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
