"""The Batch stack offers only what Batch runs: no multi-node queue on Spot, EFA software and an IMDS block at
boot. The template's own Rules are evaluated here (cfn-lint does not evaluate them against parameter values)."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from airflow_provider_trainium.compute.ecs.definitions import STOP_TIMEOUT_SECONDS
from tests.integration.cloudformation.conftest import substitute

BATCH_PREFIXES = ("Trn1", "Trn1n", "Trn2")


def evaluate(node: Any, params: dict[str, str], condition: Callable[[str], bool] | None = None) -> Any:
    """The intrinsic functions a Rule or a Condition may use, as CloudFormation evaluates them at stack creation
    (``condition`` gives the value of a named Condition, for the Conditions section)."""
    if isinstance(node, dict) and len(node) == 1:
        ((name, args),) = node.items()
        if name == "Ref":
            return params[args]
        if name == "Condition" and condition is not None:
            return condition(args)
        if name == "Fn::Equals":
            left, right = (evaluate(a, params, condition) for a in args)
            return str(left) == str(right)
        if name == "Fn::Not":
            return not evaluate(args[0], params, condition)
        if name == "Fn::And":
            return all(evaluate(a, params, condition) for a in args)
        if name == "Fn::Or":
            return any(evaluate(a, params, condition) for a in args)
        raise AssertionError(f"rule function {name} is not evaluated here")
    return node


def parameters(template: dict[str, Any], **given: str) -> dict[str, str]:
    """Parameter values of a deployment: ``given``, the template's defaults for the rest."""
    return {k: str(p.get("Default", "")) for k, p in template["Parameters"].items()} | given


def conditions(template: dict[str, Any], **given: str) -> dict[str, bool]:
    """Every Condition of the template for these parameter values."""
    params, known = parameters(template, **given), {}

    def condition(name: str) -> bool:
        if name not in known:
            known[name] = bool(evaluate(template["Conditions"][name], params, condition))
        return known[name]

    return {name: condition(name) for name in template["Conditions"]}


NO_VALUE = object()


def resolve_ifs(node: Any, truth: dict[str, bool]) -> Any:
    """``node`` with each Fn::If replaced by the branch its condition picks, and properties set to
    AWS::NoValue left out, as CloudFormation renders a resource."""
    if isinstance(node, dict):
        if set(node) == {"Fn::If"}:
            name, when_true, when_false = node["Fn::If"]
            return resolve_ifs(when_true if truth[name] else when_false, truth)
        if node == {"Ref": "AWS::NoValue"}:
            return NO_VALUE
        resolved = {k: resolve_ifs(v, truth) for k, v in node.items()}
        return {k: v for k, v in resolved.items() if v is not NO_VALUE}
    if isinstance(node, list):
        return [v for v in (resolve_ifs(item, truth) for item in node) if v is not NO_VALUE]
    return node


def failed_rules(template: dict[str, Any], **given: str) -> list[str]:
    """Names of the Rules whose assertions fail for these parameter values (defaults for the rest)."""
    params = parameters(template, **given)
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
    """The same script everywhere but for the driver it pins: Trn2 the native image's
    (NativeNeuronDriverVersion), Trn1 and Trn1n the XLA image's (NeuronDriverVersion)."""
    bodies = {p: batch["Resources"][f"{p}LaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
              for p in BATCH_PREFIXES}  # fmt: skip
    native = {p for p, b in bodies.items() if "NativeNeuronDriverVersion" in str(b)}
    assert native == {"Trn2"}
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
    # Without working EFA the host takes itself out (test_driver_pin.py runs it).
    assert script.rstrip().endswith(
        '/opt/amazon/efa/bin/fi_info -p efa || take_out "EFA check failed: fi_info -p efa lists no EFA provider"'
    )


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


STOP_TIMEOUT = f"{STOP_TIMEOUT_SECONDS}s"


def ecs_config_values(text: str, key: str) -> list[str]:
    """Every value ``text`` gives ``key`` in the ECS agent config (an echo of key=value or a heredoc line)."""
    return re.findall(rf"(?:^|[\s'\"]){key}=([^\s'\"]+)", text, flags=re.MULTILINE)


@pytest.mark.parametrize("prefix", BATCH_PREFIXES)
def test_a_batch_job_gets_the_ecs_tasks_stop_timeout(batch, prefix):
    """The ECS agent waits ECS_CONTAINER_STOP_TIMEOUT between SIGTERM and SIGKILL (default 30s on Linux,
    aws/amazon-ecs-agent README); a Batch host gets the ECS tasks' stopTimeout, so a job's final upload has as
    long on Batch as on ECS. The boothook adds it once, however often it runs."""
    boothook = user_data_parts(batch, prefix)["text/cloud-boothook"]
    assert set(ecs_config_values(boothook, "ECS_CONTAINER_STOP_TIMEOUT")) == {STOP_TIMEOUT}
    assert (
        f"grep -qs '^ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT}$' /etc/ecs/ecs.config"
        f" || echo 'ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT}' >> /etc/ecs/ecs.config"
    ) in boothook


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash runs the boothook")
def test_the_boothook_writes_each_agent_setting_once_however_often_it_runs(batch, tmp_path):
    """A boothook runs on every boot: run twice, it leaves one line per setting."""
    bin_dir, ecs = tmp_path / "bin", tmp_path / "ecs"
    bin_dir.mkdir()
    for name in ("systemctl", "iptables"):
        (bin_dir / name).write_text("#!/bin/bash\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    script = user_data_parts(batch, "Trn1")["text/cloud-boothook"].replace("/etc/ecs", str(ecs))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for _ in range(2):
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
    lines = (ecs / "ecs.config").read_text().splitlines()
    assert lines == ["ECS_AWSVPC_BLOCK_IMDS=true", f"ECS_CONTAINER_STOP_TIMEOUT={STOP_TIMEOUT}"]


def test_an_ecs_task_gets_its_definitions_stop_timeout(templates):
    user_data = templates["ecs"]["Resources"]["LaunchTemplate"]["Properties"]["LaunchTemplateData"]["UserData"]
    assert ecs_config_values(user_data["Fn::Base64"]["Fn::Sub"], "ECS_CONTAINER_STOP_TIMEOUT") == [STOP_TIMEOUT]
