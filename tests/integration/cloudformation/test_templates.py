"""What the templates promise, read from the templates themselves: EFA wiring per instance type matches the
catalog, nothing is reachable from the internet, every disk is encrypted, and the outputs cover the
trainium connection."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_trainium.compute.remote import ec2_instance_types
from airflow_provider_trainium.neuron.catalog import CATALOG
from airflow_provider_trainium.stack import DRIVER_OUTPUTS as STACK_DRIVER_OUTPUTS
from airflow_provider_trainium.stack import ECS_INSTANCE_TYPE_OUTPUT, NOT_FROM_STACK, OUTPUT_FIELDS
from tests.integration.cloudformation.conftest import TEMPLATES

BATCH_TYPES = {"Trn1": "trn1.32xlarge", "Trn1n": "trn1n.32xlarge", "Trn2": "trn2.48xlarge"}


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {name: res for name, res in template["Resources"].items() if res["Type"] == kind}


@pytest.mark.parametrize(("prefix", "instance_type"), sorted(BATCH_TYPES.items()))
def test_batch_launch_template_has_one_efa_interface_per_network_card(
    templates: dict[str, Any], prefix: str, instance_type: str
) -> None:
    batch = templates["batch"]
    data = batch["Resources"][f"{prefix}LaunchTemplate"]["Properties"]["LaunchTemplateData"]
    interfaces = data["NetworkInterfaces"]
    assert len(interfaces) == CATALOG[instance_type].efa_interfaces
    assert [i["NetworkCardIndex"] for i in interfaces] == list(range(len(interfaces)))
    assert {i["InterfaceType"] for i in interfaces} == {"efa"}
    assert [i["DeviceIndex"] for i in interfaces] == [0] + [1] * (len(interfaces) - 1)
    compute = batch["Resources"][f"{prefix}ComputeEnvironment"]["Properties"]["ComputeResources"]
    assert compute["InstanceTypes"] == [instance_type]
    # In its cluster placement group, except on a Capacity Block (test_capacity_reservations.py).
    assert compute["PlacementGroup"] == {
        "Fn::If": ["UseCapacityBlock", {"Ref": "AWS::NoValue"}, {"Ref": f"{prefix}PlacementGroup"}]
    }
    assert batch["Resources"][f"{prefix}PlacementGroup"]["Properties"]["Strategy"] == "cluster"
    # The node group is on every EFA interface and not on the compute environment: Batch refuses both
    # ("Either compute environment Security Groups or Network Interfaces in Launch template are exclusively
    # allowed"; test_batch_rules.py), and the multi-node task interface gets the instance's groups.
    node_group = {"Fn::ImportValue": {"Fn::Sub": "${BaseStackName}-SecurityGroups"}}
    assert "SecurityGroupIds" not in compute
    assert all(i["Groups"] == [node_group] for i in interfaces)
    per_node = CATALOG[instance_type].vcpus
    for nodes, row in batch["Mappings"]["MaxvCpus"].items():
        assert row[prefix] == int(nodes) * per_node


def launched_types(templates: dict[str, Any]) -> dict[str, set[str]]:
    """The instance types each compute stack can launch: the ECS stack's InstanceType choices, the instance
    types of every Batch compute environment."""
    ecs_types = set(templates["ecs"]["Parameters"]["InstanceType"]["AllowedValues"])
    batch = resources(templates["batch"], "AWS::Batch::ComputeEnvironment").values()
    batch_types = {t for ce in batch for t in ce["Properties"]["ComputeResources"]["InstanceTypes"]}
    return {"ecs": ecs_types, "batch": batch_types}


def test_instance_types_offered_are_trainium_ones(templates: dict[str, Any]) -> None:
    launched = launched_types(templates)
    assert launched["ecs"] <= set(CATALOG)
    # Batch queues are for multi-node types EC2 can launch (trn3.48xlarge cannot yet: compute/remote.py). The
    # Batch stack has no trn2u.48xlarge queue (docs/fidelity.md, "Trn2 instance types"); the ECS stack offers it.
    assert launched["batch"] == {"trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"}
    assert launched["batch"] <= {name for name, it in CATALOG.items() if it.multi_node} & ec2_instance_types()


def test_the_stacks_offer_exactly_the_catalog_types_ec2_lists(templates: dict[str, Any]) -> None:
    """Every catalog type the installed botocore's EC2 model lists is offered by a stack, and a stack offers
    nothing else: a new type in the catalog (or in EC2) fails here until a stack offers it, and a type EC2 does
    not take (trn3.48xlarge with this botocore) stays out of the stacks."""
    launched = launched_types(templates)
    offered = launched["ecs"] | launched["batch"]
    assert offered == set(CATALOG) & ec2_instance_types(), sorted(offered ^ (set(CATALOG) & ec2_instance_types()))


@pytest.mark.parametrize("name", ["ecs", "batch"])
def test_every_instance_type_a_template_launches_is_one_ec2_knows(templates: dict[str, Any], name: str) -> None:
    """A stack offering a type EC2 does not take (trn3.48xlarge, which botocore's EC2 model does not list)
    rolls back at its first launch. Read from the installed botocore, so a type it adds may come back."""
    known = ec2_instance_types()
    assert known  # the model was read
    assert launched_types(templates)[name] <= known, sorted(launched_types(templates)[name] - known)


@pytest.mark.parametrize("name", ["ecs", "batch"])
def test_every_launch_template_terminates_its_instance_on_shutdown(templates: dict[str, Any], name: str) -> None:
    """A host that takes itself out (failed driver pin or EFA check) shuts down; terminated, it is replaced by
    the Auto Scaling group (ECS) or by Batch, and is no longer billed (a stopped one keeps its volumes)."""
    launch_templates = resources(templates[name], "AWS::EC2::LaunchTemplate")
    assert launch_templates
    for lt_name, lt in launch_templates.items():
        assert lt["Properties"]["LaunchTemplateData"].get("InstanceInitiatedShutdownBehavior") == "terminate", lt_name


@pytest.mark.parametrize("name", ["ecs", "batch"])
def test_instances_require_imdsv2_and_encrypt_their_disks(templates: dict[str, Any], name: str) -> None:
    launch_templates = resources(templates[name], "AWS::EC2::LaunchTemplate")
    assert launch_templates
    for data in (lt["Properties"]["LaunchTemplateData"] for lt in launch_templates.values()):
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
        for mapping in data["BlockDeviceMappings"]:
            assert mapping["Ebs"]["Encrypted"] is True
            assert mapping["Ebs"]["VolumeType"] == "gp3"


def test_no_inbound_rule_opens_the_nodes_to_any_address(templates: dict[str, Any]) -> None:
    base = templates["base"]
    for group in resources(base, "AWS::EC2::SecurityGroup").values():
        assert "SecurityGroupIngress" not in group["Properties"]
    ingress = list(resources(base, "AWS::EC2::SecurityGroupIngress").values())
    assert ingress
    for rule in ingress:
        props = rule["Properties"]
        assert "CidrIp" not in props and "CidrIpv6" not in props
        assert props["SourceSecurityGroupId"] == props["GroupId"]


def test_job_role_reaches_only_the_artifact_prefix(templates: dict[str, Any]) -> None:
    role = templates["base"]["Resources"]["JobRole"]["Properties"]
    statements = [s for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]]
    assert "ManagedPolicyArns" not in role
    assert all(s["Resource"] != "*" for s in statements)
    objects = next(s for s in statements if "s3:PutObject" in s["Action"])
    assert all(r["Fn::Sub"].startswith("${ArtifactBucket.Arn}/${ArtifactPrefix}/") for r in objects["Resource"])


# The driver outputs: configure turns them into neuron_driver_versions entries for the instance types the stack
# runs (stack.DRIVER_OUTPUTS), so the ECS and Batch stacks may each give NeuronDriverVersion.
DRIVER_OUTPUTS = {"NeuronDriverVersion": {"ecs", "batch"}, "NativeNeuronDriverVersion": {"batch"}}


def test_outputs_cover_every_connection_field_exactly_once(templates: dict[str, Any]) -> None:
    provided: dict[str, set[str]] = {}
    drivers: dict[str, set[str]] = {}
    for name in TEMPLATES:
        for output in templates[name].get("Outputs", {}):
            if output in OUTPUT_FIELDS:
                provided.setdefault(output, set()).add(name)
            if output in STACK_DRIVER_OUTPUTS:
                drivers.setdefault(output, set()).add(name)
    assert set(provided) == set(OUTPUT_FIELDS)
    for output, stacks in provided.items():
        assert len(stacks) == 1, f"{output} is an output of {sorted(stacks)}"
    assert not NOT_FROM_STACK & set(OUTPUT_FIELDS.values())
    assert drivers == DRIVER_OUTPUTS and set(drivers) == STACK_DRIVER_OUTPUTS
    # The ECS stack's driver is tied to its one instance type by this output.
    assert templates["ecs"]["Outputs"][ECS_INSTANCE_TYPE_OUTPUT]["Value"] == {"Ref": "InstanceType"}


def test_bucket_and_registry_are_private_and_encrypted(templates: dict[str, Any]) -> None:
    base = templates["base"]
    for name, bucket in resources(base, "AWS::S3::Bucket").items():
        props = bucket["Properties"]
        assert set(props["PublicAccessBlockConfiguration"].values()) == {True}, name
        assert props["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        policy = next(
            p["Properties"]["PolicyDocument"]
            for p in resources(base, "AWS::S3::BucketPolicy").values()
            if p["Properties"]["Bucket"] == {"Ref": name}
        )
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in policy["Statement"]
        ), f"{name} accepts plain HTTP"
    rules = base["Resources"]["ArtifactBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    prefixes = {r["Id"]: r.get("Prefix") for r in rules}
    assert prefixes["expire-checkpoints"] == {"Fn::Sub": "${ArtifactPrefix}/checkpoints/"}
    assert prefixes["expire-compile-cache"] == {"Fn::Sub": "${ArtifactPrefix}/compile-cache/"}
    repo = base["Resources"]["Repository"]["Properties"]
    assert repo["ImageScanningConfiguration"] == {"ScanOnPush": True}
    assert repo["ImageTagMutability"] == "IMMUTABLE"
    for group in resources(base, "AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] == {"Ref": "LogRetentionDays"}
        assert "KmsKeyId" in group["Properties"]
