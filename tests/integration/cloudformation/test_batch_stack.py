"""The Batch stack offers only what Batch runs: no multi-node queue on Spot, EFA software and an IMDS block at
boot. The template's own Rules are evaluated here (cfn-lint does not evaluate them against parameter values)."""

from __future__ import annotations

import email
import shutil
import subprocess
from typing import Any

import pytest

from tests.integration.cloudformation.conftest import substitute

BATCH_PREFIXES = ("Trn1", "Trn1n", "Trn2", "Trn3")


def evaluate(node: Any, params: dict[str, str]) -> Any:
    """The intrinsic functions a Rule may use, as CloudFormation evaluates them at stack creation."""
    if isinstance(node, dict) and len(node) == 1:
        ((name, args),) = node.items()
        if name == "Ref":
            return params[args]
        if name == "Fn::Equals":
            left, right = (evaluate(a, params) for a in args)
            return str(left) == str(right)
        if name == "Fn::Not":
            return not evaluate(args[0], params)
        if name == "Fn::And":
            return all(evaluate(a, params) for a in args)
        if name == "Fn::Or":
            return any(evaluate(a, params) for a in args)
        raise AssertionError(f"rule function {name} is not evaluated here")
    return node


def failed_rules(template: dict[str, Any], **given: str) -> list[str]:
    """Names of the Rules whose assertions fail for these parameter values (defaults for the rest)."""
    params = {k: str(p.get("Default", "")) for k, p in template["Parameters"].items()} | given
    failed = []
    for name, rule in template.get("Rules", {}).items():
        if "RuleCondition" in rule and not evaluate(rule["RuleCondition"], params):
            continue
        if not all(evaluate(a["Assert"], params) for a in rule["Assertions"]):
            failed.append(name)
    return failed


@pytest.fixture
def batch(templates: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return templates["batch"]


@pytest.mark.parametrize("max_nodes", ["2", "4", "64"])
def test_spot_is_refused_for_compute_environments_that_can_hold_a_multi_node_job(batch, max_nodes):
    assert failed_rules(batch, BaseStackName="b", PurchaseOption="spot", MaxNodes=max_nodes) == [
        "SpotOnlyForSingleNode"
    ]
    assert failed_rules(batch, BaseStackName="b", PurchaseOption="on-demand", MaxNodes=max_nodes) == []
    assert failed_rules(batch, BaseStackName="b", PurchaseOption="spot", MaxNodes="1") == []


def test_spot_rule_says_why(batch):
    (assertion,) = batch["Rules"]["SpotOnlyForSingleNode"]["Assertions"]
    assert "multi-node parallel jobs" in assertion["AssertDescription"]
    assert "MaxNodes to 1" in assertion["AssertDescription"]


def user_data_parts(batch: dict[str, Any], prefix: str) -> dict[str, str]:
    data = batch["Resources"][f"{prefix}LaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
    message = email.message_from_string(data["Fn::Base64"]["Fn::Sub"])
    assert message.is_multipart(), "Batch takes launch template user data only as a MIME multi-part archive"
    return {part.get_content_type(): part.get_payload() for part in message.get_payload()}


def test_every_efa_launch_template_has_the_same_user_data(batch):
    """The same script everywhere but for the driver it pins: Trn2 and Trn3 the native image's
    (NativeNeuronDriverVersion), Trn1 and Trn1n the XLA image's (NeuronDriverVersion)."""
    bodies = {p: batch["Resources"][f"{p}LaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
              for p in BATCH_PREFIXES}  # fmt: skip
    native = {p for p, b in bodies.items() if "NativeNeuronDriverVersion" in str(b)}
    assert native == {"Trn2", "Trn3"}
    assert len({str(b).replace("NativeNeuronDriverVersion", "NeuronDriverVersion") for b in bodies.values()}) == 1


@pytest.mark.parametrize("prefix", BATCH_PREFIXES)
def test_boot_blocks_imds_for_awsvpc_and_host_network_tasks(batch, prefix):
    boothook = user_data_parts(batch, prefix)["text/cloud-boothook"]
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in boothook and "/etc/ecs/ecs.config" in boothook
    rule = next(line for line in boothook.splitlines() if line.startswith("rule="))
    assert "-d 169.254.169.254/32" in rule and "-m cgroup --path ecstasks.slice" in rule and "-j DROP" in rule
    assert "systemctl start ecstasks.slice" in boothook  # the cgroup must exist before the rule names it


@pytest.mark.parametrize("prefix", BATCH_PREFIXES)
def test_boot_installs_verified_efa_software_unless_the_ami_has_it(batch, prefix):
    script = user_data_parts(batch, prefix)["text/x-shellscript"]
    assert "if [ ! -x /opt/amazon/efa/bin/fi_info ]" in script
    assert "https://efa-installer.amazonaws.com/$f" in script
    assert script.index("gpg --batch --verify") < script.index("tar -xf") < script.index("./efa_installer.sh -y")
    # Without working EFA the user data exits non-zero here (the instance still joins the cluster).
    assert script.rstrip().endswith("/opt/amazon/efa/bin/fi_info -p efa")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is needed to parse the scripts")
@pytest.mark.parametrize("part", ["text/cloud-boothook", "text/x-shellscript"])
def test_user_data_scripts_parse(batch, part):
    script = substitute(user_data_parts(batch, "Trn1")[part], NeuronDriverVersion="2.26.5.0")
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_ecs_instances_block_imds_for_awsvpc_tasks(templates):
    ecs = templates["ecs"]
    user_data = ecs["Resources"]["LaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
    assert "ECS_AWSVPC_BLOCK_IMDS=true" in user_data["Fn::Base64"]["Fn::Sub"]
