"""Every Trainium host runs the Neuron driver its training image's runtime accepts, pinned by the stacks.

The ECS-optimized Neuron AMI (SSM /aws/service/ecs/optimized-ami/amazon-linux-2023/neuron/recommended) is
built with the newest aws-neuronx-dkms of its build date (aws/amazon-ecs-ami,
scripts/enable-ecs-agent-inferentia-support.sh), and a driver newer than the image's Neuron runtime accepts
fails nrt_init() (Neuron 2.31 release notes: driver 2.29 needs Neuron Runtime 2.33 or later). So the user
data of every launch template installs exactly ``NeuronDriverVersion`` from the Neuron yum repository, as
AWS's Batch llama2 sample (aws-neuron-samples) installs its driver in launch template user data, reloads the
module and, unless the loaded driver is that version, takes the host out: disables the ECS agent, shuts the
instance down (its launch template terminates it on shutdown) and fails. No one driver serves both training
images (the XLA image's runtime 2.30 fails on driver 2.29+, the native image's 2.35 needs 2.31+), so the Batch
stack's Trn2 launch template pins ``NativeNeuronDriverVersion`` instead. The scripts run here against stand-ins
for rpm, dnf, modprobe, modinfo, fi_info, systemctl and shutdown, with the paths they touch moved into a
temporary directory."""

from __future__ import annotations

import email
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_trainium.hooks.trainium_fields import CONN_FIELDS
from airflow_provider_trainium.neuron.releases import table
from airflow_provider_trainium.stack import BATCH_DRIVER_OUTPUTS, DRIVER_OUTPUTS, OUTPUT_FIELDS, fields_from_outputs
from tests.integration.cloudformation.conftest import substitute

PINNING = ("ecs", "batch")
SCRIPTS = ("ecs", "batch-Trn1", "batch-Trn1n", "batch-Trn2")
#: The parameter each script pins (the XLA image's driver on Trn1, the native image's on Trn2).
PARAMETER = {
    "ecs": "NeuronDriverVersion",
    "batch-Trn1": "NeuronDriverVersion",
    "batch-Trn1n": "NeuronDriverVersion",
    "batch-Trn2": "NativeNeuronDriverVersion",
}
#: (template, driver parameter, the image release whose driver is its default).
DEFAULTS = [
    ("ecs", "NeuronDriverVersion", "xla"),
    ("batch", "NeuronDriverVersion", "xla"),
    ("batch", "NativeNeuronDriverVersion", "native"),
]
PINNED = "2.26.5.0"
NEWER = "2.29.3.0"
# Paths the scripts touch on a host, and where they go in a test run (below its temporary directory).
MOVED = {"/sys/module/neuron": "sys/module/neuron", "/etc/yum.repos.d": "yum.repos.d", "/etc/ecs": "ecs",
         "/opt/amazon/efa": "efa"}  # fmt: skip

needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="bash runs the user data scripts")


def user_data_script(templates: dict[str, Any], which: str) -> tuple[str, dict[str, str]]:
    """The shell script of a launch template's user data (Batch: its text/x-shellscript part) as a Fn::Sub
    body, and the values its ${...} take in a test."""
    if which == "ecs":
        data = templates["ecs"]["Resources"]["LaunchTemplate"]["Properties"]["LaunchTemplateData"]
        return data["UserData"]["Fn::Base64"]["Fn::Sub"], {"Cluster": "trn-cluster"}
    prefix = which.split("-", 1)[1]
    data = templates["batch"]["Resources"][f"{prefix}LaunchTemplate"]["Properties"]["LaunchTemplateData"]
    message = email.message_from_string(data["UserData"]["Fn::Base64"]["Fn::Sub"])
    (script,) = [p.get_payload() for p in message.get_payload() if p.get_content_type() == "text/x-shellscript"]
    return script, {}


@pytest.mark.parametrize(("name", "parameter_name", "stack"), DEFAULTS)
def test_driver_default_is_the_one_the_image_release_ships(templates, name, parameter_name, stack) -> None:
    """Each default is the aws-neuronx-dkms of the Neuron release its image builds on (releases.toml: the XLA
    image's for Trn1 and the ECS stack, the native image's for the Batch Trn2 queue), and matches the
    template's own AllowedPattern and the connection fields' pattern."""
    parameter = templates[name]["Parameters"][parameter_name]
    assert parameter["Type"] == "String"
    assert parameter["Default"] == table().image_for(stack).driver
    assert re.fullmatch(parameter["AllowedPattern"], parameter["Default"])
    assert parameter["AllowedPattern"] == CONN_FIELDS["neuron_driver_version"]["schema"]["pattern"]
    per_type = CONN_FIELDS["neuron_driver_versions"]["schema"]["additionalProperties"]["pattern"]
    assert parameter["AllowedPattern"] == per_type
    for bad in ("2", "2.26.*", "latest", "2.26.5.0; reboot"):
        assert not re.fullmatch(parameter["AllowedPattern"], bad), bad


def test_the_two_batch_drivers_cannot_be_one(templates: dict[str, Any]) -> None:
    """Why there are two: the XLA release's runtime rejects the native release's driver and the other way round."""
    xla, native = table().image_for("xla"), table().image_for("native")
    assert not xla.accepts_driver(native.driver) and not native.accepts_driver(xla.driver)
    described = templates["batch"]["Parameters"]["NativeNeuronDriverVersion"]["Description"]
    assert "Trn2 instances" in described and "native stack's image" in described
    assert "XLA stack's image needs this set to the XLA driver" in described
    assert "Trn1 and Trn1n" in templates["batch"]["Parameters"]["NeuronDriverVersion"]["Description"]
    assert "native stack's" in templates["ecs"]["Parameters"]["InstanceType"]["Description"]
    assert "set NeuronDriverVersion to the driver" in templates["ecs"]["Parameters"]["InstanceType"]["Description"]


@pytest.mark.parametrize("which", SCRIPTS)
def test_each_launch_template_pins_its_own_parameter(templates: dict[str, Any], which: str) -> None:
    """The user data names only its own driver parameter, and for Batch it is the one configure reads for that
    family (stack.BATCH_DRIVER_OUTPUTS): a Trn2 host's entry in the connection is the driver it installs."""
    script, _ = user_data_script(templates, which)
    named = set(re.findall(r"\$\{(\w*NeuronDriverVersion)\}", script))
    assert named == {PARAMETER[which]}
    if which != "ecs":
        assert BATCH_DRIVER_OUTPUTS[which.split("-", 1)[1].lower()] == PARAMETER[which]


@pytest.mark.parametrize("name", PINNING)
def test_every_pinning_stack_outputs_its_drivers(templates: dict[str, Any], name: str) -> None:
    """Each driver parameter is output as itself, and configure reads those outputs (stack.DRIVER_OUTPUTS)."""
    outputs = templates[name]["Outputs"]
    drivers = {key for key in outputs if key.endswith("NeuronDriverVersion")}
    assert drivers == (
        {"NeuronDriverVersion"} if name == "ecs" else {"NeuronDriverVersion", "NativeNeuronDriverVersion"}
    )
    for key in drivers:
        assert outputs[key]["Value"] == {"Ref": key}
    assert drivers <= DRIVER_OUTPUTS
    assert not drivers & set(OUTPUT_FIELDS)  # per instance type, not through the CamelCase field mapping


def test_configure_gives_each_batch_queue_the_driver_of_its_launch_template() -> None:
    """The Batch stack's two outputs become one entry per queue: Trn1/Trn1n the XLA driver, Trn2/Trn3 the native."""
    xla, native = table().image_for("xla").driver, table().image_for("native").driver
    queues = ",".join(f"{t}=arn:q-{t}" for t in ("trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge", "trn3.48xlarge"))
    outputs = {"BatchJobQueues": queues, "NeuronDriverVersion": xla, "NativeNeuronDriverVersion": native}
    found = fields_from_outputs("trn-batch", outputs)
    assert found["neuron_driver_versions"] == {
        "trn1.32xlarge": xla,
        "trn1n.32xlarge": xla,
        "trn2.48xlarge": native,
        "trn3.48xlarge": native,
    }
    assert "neuron_driver_version" not in found


@pytest.mark.parametrize("which", SCRIPTS)
def test_user_data_installs_the_pinned_package_and_checks_the_loaded_driver(templates, which) -> None:
    script, _ = user_data_script(templates, which)
    assert f'dnf install -y "aws-neuronx-dkms-${{{PARAMETER[which]}}}"' in script
    assert "baseurl=https://yum.repos.neuron.amazonaws.com" in script
    assert "gpgkey=https://yum.repos.neuron.amazonaws.com/GPG-PUB-KEY-AMAZON-AWS-NEURON.PUB" in script
    assert "cat /sys/module/neuron/version" in script


STUBS = {
    "rpm": """
case "$1" in
  --import) ;;
  -q) [ -f "$STATE/installed" ] || { echo "package aws-neuronx-dkms is not installed"; exit 1; }
      cat "$STATE/installed" ;;
  -e) rm -f "$STATE/installed" "$STATE/ondisk" ;;
  *) exit 2 ;;
esac
""",
    # dnf installs the package and DKMS builds its module (the one on disk) unless told to fail.
    "dnf": """
for a in "$@"; do
  case "$a" in
    aws-neuronx-dkms-*) [ ! -f "$STATE/dnf_fails" ] || exit 1
      printf %s "${a#aws-neuronx-dkms-}" > "$STATE/installed"; cp "$STATE/installed" "$STATE/ondisk" ;;
  esac
done
""",
    "modprobe": """
mod="$ROOT/sys/module/neuron"
if [ "$1" = -r ]; then [ ! -f "$STATE/busy" ] || exit 1; rm -rf "$mod"; exit 0; fi
[ ! -d "$mod" ] || exit 0
[ -f "$STATE/ondisk" ] || exit 1
mkdir -p "$mod"; cp "$STATE/ondisk" "$mod/version"
""",
    "modinfo": """[ -f "$STATE/ondisk" ] && cat "$STATE/ondisk" """,
    # A host taking itself out: only logged.
    "systemctl": "",
    "shutdown": "",
}
TAKE_OUT = ["systemctl disable --now ecs", "shutdown -h now"]


def took_itself_out(log: list[str]) -> list[str]:
    """The calls of the log that take a host out (stop its ECS agent for good, shut it down), in order."""
    return [line for line in log if line.startswith(("systemctl", "shutdown"))]


def run_script(templates, which: str, tmp_path: Path, installed: str | None, flags: tuple[str, ...] = ()):
    """Run the user data on a host whose aws-neuronx-dkms ``installed`` is also the loaded driver."""
    script, values = user_data_script(templates, which)
    script = substitute(script, **{PARAMETER[which]: PINNED}, **values)
    unmoved = script
    for path, moved in MOVED.items():
        unmoved = unmoved.replace(path, "")
        script = script.replace(path, str(tmp_path / moved))
    assert not re.search(r"(?<![\w/.-])/(etc|sys|opt|lib|usr|var)/", unmoved), "a host path this test does not move"
    state, bin_dir = tmp_path / "state", tmp_path / "bin"
    for d in (state, bin_dir, tmp_path / "yum.repos.d", tmp_path / "ecs", tmp_path / "efa" / "bin"):
        d.mkdir(parents=True)
    fi_info = '[ ! -f "$STATE/no_efa" ] || exit 1; echo provider: efa'
    for name, body in {**STUBS, "fi_info": fi_info}.items():
        stub = (tmp_path / "efa" / "bin" if name == "fi_info" else bin_dir) / name
        stub.write_text(f'#!/bin/bash\necho "{name} $*" >> "$STATE/log"\n{body}\n')
        stub.chmod(0o755)
    if installed:
        (state / "installed").write_text(installed)
        (state / "ondisk").write_text(installed)
        (tmp_path / "sys" / "module" / "neuron").mkdir(parents=True)
        (tmp_path / "sys" / "module" / "neuron" / "version").write_text(installed + "\n")
    for flag in flags:
        (state / flag).touch()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STATE": str(state), "ROOT": str(tmp_path)}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    log = (state / "log").read_text().splitlines() if (state / "log").exists() else []
    loaded = tmp_path / "sys" / "module" / "neuron" / "version"
    ecs_config = tmp_path / "ecs" / "ecs.config"
    driver = loaded.read_text().strip() if loaded.exists() else None
    return done, log, driver, ecs_config.read_text() if ecs_config.exists() else ""


def run_to_the_pin(
    templates, which: str, tmp_path: Path, installed: str | None, *, check_ecs_config: bool = True
) -> list[str]:
    """The ``which`` script on a host with driver ``installed`` (None: none): it must succeed with the pinned
    driver loaded, the host must not take itself out, and (``check_ecs_config``) the ECS script must have
    written the agent config that joins the stack's cluster. The stubs' log."""
    done, log, loaded, ecs_config = run_script(templates, which, tmp_path, installed=installed)
    assert done.returncode == 0, done.stderr
    assert loaded == PINNED
    assert took_itself_out(log) == []
    if check_ecs_config and which == "ecs":
        assert "ECS_CLUSTER=trn-cluster" in ecs_config
    return log


@needs_bash
@pytest.mark.parametrize("which", SCRIPTS)
def test_a_host_already_on_the_pinned_driver_is_left_alone(templates, which, tmp_path) -> None:
    log = run_to_the_pin(templates, which, tmp_path, installed=PINNED)
    assert not [line for line in log if line.startswith(("dnf", "modprobe"))], log


@needs_bash
@pytest.mark.parametrize("which", SCRIPTS)
def test_a_newer_driver_is_replaced_by_the_pinned_one_and_loaded(templates, which, tmp_path) -> None:
    log = run_to_the_pin(templates, which, tmp_path, installed=NEWER)
    calls = [line for line in log if line.startswith(("rpm -e", "dnf install -y aws-neuronx-dkms", "modprobe"))]
    assert calls == [
        "rpm -e --nodeps aws-neuronx-dkms",
        f"dnf install -y aws-neuronx-dkms-{PINNED}",
        "modprobe -r neuron",
        "modprobe neuron",
    ]
    repo = (tmp_path / "yum.repos.d" / "neuron.repo").read_text()
    assert "baseurl=https://yum.repos.neuron.amazonaws.com\n" in repo and "gpgcheck=1\n" in repo


@needs_bash
@pytest.mark.parametrize("which", SCRIPTS)
def test_a_host_without_a_driver_gets_the_pinned_one(templates, which, tmp_path) -> None:
    log = run_to_the_pin(templates, which, tmp_path, installed=None, check_ecs_config=False)
    assert not [line for line in log if line.startswith("rpm -e")]


@needs_bash
@pytest.mark.parametrize("which", SCRIPTS)
@pytest.mark.parametrize(
    ("flags", "loaded_then"),
    [(("busy",), NEWER), (("dnf_fails",), "none (module not loaded)")],
    ids=["module-in-use", "install-fails"],
)
def test_a_host_left_on_another_driver_fails_naming_both(templates, which, tmp_path, flags, loaded_then) -> None:
    """The check reads the loaded module's version: a module that cannot be unloaded, or a package that
    cannot be installed, leaves another driver running, and the host takes itself out: it disables the ECS
    agent, which would otherwise start anyway (Batch writes ECS_CLUSTER in its own user data part; on ECS it
    would join the cluster named default), shuts down and exits non-zero. On ECS that is before the agent
    config is written, so the instance never joins the stack's cluster."""
    done, log, _, ecs_config = run_script(templates, which, tmp_path, installed=NEWER, flags=flags)
    assert done.returncode == 1
    assert f"the loaded neuron driver is {loaded_then}, {PARAMETER[which]} is {PINNED}" in done.stderr
    assert took_itself_out(log) == TAKE_OUT
    if which == "ecs":
        assert "ECS_CLUSTER" not in ecs_config
    else:
        assert not [line for line in log if line.startswith("fi_info")]  # stopped before the EFA part


@needs_bash
@pytest.mark.parametrize("which", [w for w in SCRIPTS if w.startswith("batch-")])
def test_a_batch_host_without_efa_takes_itself_out(templates, which, tmp_path) -> None:
    """A host on the pinned driver whose EFA check fails (fi_info -p efa lists no provider) is taken out too:
    a multi-node job on it would fail, or fall back off EFA."""
    done, log, loaded, _ = run_script(templates, which, tmp_path, installed=PINNED, flags=("no_efa",))
    assert loaded == PINNED
    assert done.returncode == 1
    assert "EFA check failed" in done.stderr
    assert [line for line in log if line.startswith("fi_info")] == ["fi_info -p efa"]
    assert took_itself_out(log) == TAKE_OUT


@needs_bash
@pytest.mark.parametrize("which", SCRIPTS)
def test_user_data_scripts_parse(templates, which) -> None:
    script, values = user_data_script(templates, which)
    done = subprocess.run(
        ["bash", "-n"], input=substitute(script, **{PARAMETER[which]: PINNED}, **values), capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
