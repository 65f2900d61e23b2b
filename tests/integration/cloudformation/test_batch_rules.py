"""Rules AWS Batch and EC2 enforce at deployment that cfn-lint cannot see, checked over every
AWS::Batch::ComputeEnvironment of cloudformation/batch.yaml (its LaunchTemplate Ref resolved to the resource).

Each check returns what it finds wrong with one compute environment, so it can be run on any version of the
template (for instance the committed one: ``git show HEAD:cloudformation/batch.yaml``)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.neuron.catalog import CATALOG
from tests.integration.cloudformation.conftest import load_template

SPOT_TYPES = {"SPOT", "FARGATE_SPOT"}


def compute_environments(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {n: r for n, r in template["Resources"].items() if r["Type"] == "AWS::Batch::ComputeEnvironment"}


def ref_target(template: dict[str, Any], node: Any, kind: str) -> dict[str, Any] | None:
    """The resource a ``{"Ref": name}`` points at, which must be of ``kind``; None when ``node`` is no Ref."""
    if not (isinstance(node, dict) and set(node) == {"Ref"}):
        return None
    resource = template["Resources"][node["Ref"]]
    assert resource["Type"] == kind, f"{node['Ref']} is a {resource['Type']}, not a {kind}"
    return resource


def launch_template_data(template: dict[str, Any], ce: dict[str, Any]) -> dict[str, Any]:
    spec = ce["Properties"]["ComputeResources"].get("LaunchTemplate")
    if not spec:
        return {}
    for key in ("LaunchTemplateId", "LaunchTemplateName"):
        resource = ref_target(template, spec.get(key), "AWS::EC2::LaunchTemplate")
        if resource is not None:
            return resource["Properties"]["LaunchTemplateData"]
    raise AssertionError(f"launch template {spec} is not a Ref to a template of this stack")


def security_group_problems(template: dict[str, Any], name: str) -> list[str]:
    ce = compute_environments(template)[name]
    compute = ce["Properties"]["ComputeResources"]
    interfaces = launch_template_data(template, ce).get("NetworkInterfaces", [])
    if not interfaces:
        return []
    problems = []
    if "SecurityGroupIds" in compute:
        problems.append(f"{name} sets SecurityGroupIds while its launch template has network interfaces")
    data = launch_template_data(template, ce)
    for key in ("SecurityGroupIds", "SecurityGroups"):
        if key in data:
            problems.append(f"the launch template of {name} sets {key} beside its network interfaces")
    problems += [
        f"interface on network card {i.get('NetworkCardIndex')} of {name} has no Groups (the VPC default)"
        for i in interfaces
        if not i.get("Groups")
    ]
    return problems


def efa_problems(template: dict[str, Any], name: str) -> list[str]:
    ce = compute_environments(template)[name]
    instance_types = ce["Properties"]["ComputeResources"]["InstanceTypes"]
    interfaces = launch_template_data(template, ce).get("NetworkInterfaces", [])
    efa = [i for i in interfaces if i.get("InterfaceType") == "efa"]
    if not efa:
        return []
    problems = []
    for instance_type in instance_types:
        cards = CATALOG[instance_type].efa_interfaces if instance_type in CATALOG else 0
        if cards == 0:
            problems.append(f"{name} puts EFA interfaces on {instance_type}, which has no EFA")
        elif len(efa) != cards:
            problems.append(f"{name} has {len(efa)} EFA interfaces; {instance_type} has {cards} network cards")
    indexes = [i.get("NetworkCardIndex", 0) for i in efa]
    if sorted(indexes) != list(range(len(efa))):
        problems.append(f"{name}: EFA interfaces on network cards {indexes}, not one on each card from 0")
    primaries = [i.get("NetworkCardIndex", 0) for i in efa if i.get("DeviceIndex") == 0]
    if primaries != [0]:
        problems.append(f"{name}: the primary interface (device 0) is on cards {primaries}, not on card 0 only")
    return problems


def possible_values(node: Any) -> list[Any]:
    """Every value a property may take: each branch of its Fn::If (AWS::NoValue as None)."""
    if isinstance(node, dict) and set(node) == {"Fn::If"}:
        _, when_true, when_false = node["Fn::If"]
        return possible_values(when_true) + possible_values(when_false)
    return [None if node == {"Ref": "AWS::NoValue"} else node]


def placement_problems(template: dict[str, Any], name: str) -> list[str]:
    compute = compute_environments(template)[name]["Properties"]["ComputeResources"]
    groups = [
        ref_target(template, v, "AWS::EC2::PlacementGroup") for v in possible_values(compute.get("PlacementGroup"))
    ]
    if not any(group and group["Properties"].get("Strategy") == "cluster" for group in groups):
        return []
    subnets = compute["Subnets"]
    if isinstance(subnets, list) and len(subnets) == 1:
        return []
    return [f"{name} has a cluster placement group and subnets {subnets!r}, not exactly one subnet"]


def spot_condition(compute: dict[str, Any]) -> Any:
    """When the compute environment is Spot: False (never), True (always), or the condition's expression."""
    kind = compute["Type"]
    if isinstance(kind, str):
        return kind in SPOT_TYPES
    ((function, args),) = kind.items()
    assert function == "Fn::If", f"compute resource Type {kind} is not a string or Fn::If"
    condition, when_true, when_false = args
    spot_true, spot_false = when_true in SPOT_TYPES, when_false in SPOT_TYPES
    if spot_true == spot_false:
        return spot_true
    return condition if spot_true else {"Fn::Not": [condition]}


def resolve(template: dict[str, Any], node: Any, params: dict[str, str]) -> Any:
    """Ref, Fn::FindInMap and Fn::If of a property, for these parameter values (conditions by name)."""
    if isinstance(node, dict) and len(node) == 1:
        ((function, args),) = node.items()
        if function == "Ref":
            return params[args]
        if function == "Fn::FindInMap":
            table, first, second = (resolve(template, a, params) for a in args)
            return template["Mappings"][table][str(first)][str(second)]
    return node


def spot_rule_problems(template: dict[str, Any], name: str) -> list[str]:
    compute = compute_environments(template)[name]["Properties"]["ComputeResources"]
    when = spot_condition(compute)
    if when is False:
        return []
    rule_condition = template.get("Conditions", {}).get(when) if isinstance(when, str) else None
    covering = [
        rule_name
        for rule_name, rule in template.get("Rules", {}).items()
        if (rule.get("RuleCondition") == rule_condition if when is not True else "RuleCondition" not in rule)
        and {"Fn::Equals": [{"Ref": "MaxNodes"}, "1"]} in [a["Assert"] for a in rule["Assertions"]]
    ]
    if not covering:
        return [f"{name} can be Spot, and no rule limits MaxNodes to 1 whenever it is"]
    # MaxNodes 1 must mean one instance: the compute environment's MaxvCpus is then a single node's vCPUs.
    params = {p: str(v.get("Default", "")) for p, v in template["Parameters"].items()} | {"MaxNodes": "1"}
    max_vcpus = resolve(template, compute["MaxvCpus"], params)
    largest = max(CATALOG[t].vcpus for t in compute["InstanceTypes"])
    if max_vcpus != largest:
        return [f"{name} holds {max_vcpus} vCPUs with MaxNodes 1, not one instance ({largest})"]
    return []


@pytest.fixture(scope="module")
def batch() -> dict[str, Any]:
    return load_template("batch")


NAMES = sorted(compute_environments(load_template("batch")))


def test_the_template_has_compute_environments_to_check() -> None:
    assert NAMES == [
        "Trn1ComputeEnvironment",
        "Trn1nComputeEnvironment",
        "Trn2ComputeEnvironment",
    ]


@pytest.mark.parametrize("name", NAMES)
def test_security_groups_are_only_on_the_launch_template_interfaces(batch: dict[str, Any], name: str) -> None:
    """AWS Batch refuses a compute environment that sets ComputeResources.SecurityGroupIds while its launch
    template has NetworkInterfaces with Groups: "Either compute environment Security Groups or Network
    Interfaces in Launch template are exclusively allowed" (CreateComputeEnvironment; aws/aws-cdk#21577 and
    PR #21579). The Batch guide gives the multi-node task interface the instance's groups, and AWS's
    Trainium/EFA Batch samples set the group on the launch template's interfaces only."""
    assert security_group_problems(batch, name) == []


@pytest.mark.parametrize("name", NAMES)
def test_a_compute_environment_that_can_be_spot_holds_one_node(batch: dict[str, Any], name: str) -> None:
    """Batch runs no multi-node parallel job on Spot compute environments (Batch guide, "Multi-node parallel
    jobs"): whenever a compute environment is Spot, a template Rule (SpotOnlyForSingleNode) must hold MaxNodes
    to 1, and MaxNodes 1 must size it for a single instance."""
    assert spot_rule_problems(batch, name) == []
    assert "SpotOnlyForSingleNode" in batch["Rules"]


@pytest.mark.parametrize("name", NAMES)
def test_efa_interfaces_only_on_efa_instance_types_one_per_network_card(batch: dict[str, Any], name: str) -> None:
    """An EFA interface (InterfaceType efa) exists only on EFA-capable instance types, at most one per network
    card, and the primary interface is on card 0 (EC2 guide, "Elastic Fabric Adapter" and "Network cards");
    the count per instance type is CATALOG[...].efa_interfaces."""
    assert efa_problems(batch, name) == []


@pytest.mark.parametrize("name", NAMES)
def test_a_cluster_placement_group_has_exactly_one_subnet(batch: dict[str, Any], name: str) -> None:
    """EC2 guide, "Placement groups": "A cluster placement group is a logical grouping of instances within a
    single Availability Zone", so a compute environment with one must launch into exactly one subnet."""
    assert placement_problems(batch, name) == []


# The checks themselves, on compute environments that break each rule.
def broken(batch: dict[str, Any], name: str, change) -> dict[str, Any]:
    import copy

    template = copy.deepcopy(batch)
    change(template, template["Resources"][name]["Properties"]["ComputeResources"])
    return template


def test_the_checks_find_what_they_are_for(batch: dict[str, Any]) -> None:
    name = "Trn1ComputeEnvironment"
    lt = "Trn1LaunchTemplate"
    group = [{"Fn::ImportValue": {"Fn::Sub": "${BaseStackName}-SecurityGroups"}}]

    def add_groups(t, c):
        c["SecurityGroupIds"] = group

    assert security_group_problems(broken(batch, name, add_groups), name) != []

    def on_demand_only_rule(t, c):
        del t["Rules"]["SpotOnlyForSingleNode"]

    assert spot_rule_problems(broken(batch, name, on_demand_only_rule), name) != []

    def always_spot(t, c):
        c["Type"] = "SPOT"

    assert spot_rule_problems(broken(batch, name, always_spot), name) != []

    def trn1_small(t, c):
        c["InstanceTypes"] = ["trn1.2xlarge"]

    assert "which has no EFA" in " ".join(efa_problems(broken(batch, name, trn1_small), name))

    def one_interface_short(t, c):
        t["Resources"][lt]["Properties"]["LaunchTemplateData"]["NetworkInterfaces"].pop()

    assert efa_problems(broken(batch, name, one_interface_short), name) != []

    def two_subnets(t, c):
        c["Subnets"] = c["Subnets"] * 2

    assert placement_problems(broken(batch, name, two_subnets), name) != []
