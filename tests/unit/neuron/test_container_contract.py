"""docker/Dockerfile's ENTRYPOINT and CMD agree with the container contract the backends rely on.

The argv here is derived from the Dockerfile itself and the commands the ECS and Batch request builders
send, combined by Docker's rule, then run (dry run) by the real launcher: a backend sending a command the
image's entry point does not take fails here, not on Trainium.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.batch import definitions as batch_definitions
from airflow_provider_trainium.compute.ecs import definitions as ecs_definitions
from airflow_provider_trainium.image.dockerfile import logical_lines
from airflow_provider_trainium.neuron.container_contract import (
    IMAGE_CMD,
    IMAGE_ENTRYPOINT,
    docker_argv,
)
from airflow_provider_trainium.neuron.launch import batch_node_environment
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.spec import JobSpec

REPO = Path(__file__).resolve().parents[3]
DOCKERFILE = REPO / "docker" / "Dockerfile"


def image_entry(text: str) -> tuple[list[str] | str, list[str] | str, list[str]]:
    """(ENTRYPOINT, CMD, SHELL) of the Dockerfile's last stage; JSON form as a list, shell form as a string.

    An ENTRYPOINT resets the base image's CMD, so only a CMD written in this stage counts.
    """
    entrypoint: list[str] | str = []
    cmd: list[str] | str = []
    shell = ["/bin/sh", "-c"]
    for instruction, rest in logical_lines(text):
        if instruction == "FROM":
            entrypoint, cmd, shell = [], [], ["/bin/sh", "-c"]
        elif instruction in ("ENTRYPOINT", "CMD", "SHELL"):
            try:
                value: list[str] | str = json.loads(rest)
            except json.JSONDecodeError:
                value = rest  # shell form
            if instruction == "ENTRYPOINT":
                entrypoint = value
            elif instruction == "CMD":
                cmd = value
            else:
                shell = list(value)
    return entrypoint, cmd, shell


def run_argv(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a container argv here, in the launcher's dry-run mode, with this interpreter as the image's python."""
    assert argv[0] == "python", argv
    run_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TRAINIUM_LAUNCH_DRY_RUN": "1", **env}
    return subprocess.run([sys.executable, *argv[1:]], env=run_env, capture_output=True, text=True, check=False)


def test_the_dockerfile_declares_the_contracts_entrypoint_and_no_cmd() -> None:
    entrypoint, cmd, _ = image_entry(DOCKERFILE.read_text())
    assert isinstance(entrypoint, list), "a shell-form ENTRYPOINT would drop the command the backends send"
    assert entrypoint == list(IMAGE_ENTRYPOINT)
    assert cmd == list(IMAGE_CMD)  # no default command: a task sent without one fails instead of running one


def test_the_parser_reads_both_forms_and_docker_resets() -> None:
    text = 'FROM a\nCMD ["x"]\nFROM b\nSHELL ["/bin/bash", "-c"]\nENTRYPOINT run it\nCMD ["y"]\n'
    assert image_entry(text) == ("run it", ["y"], ["/bin/bash", "-c"])


ECS_SPEC = JobSpec(name="t", entry_point="trainium_trainer.mnist_mlp.train", args=("--epochs", "1"),
                   instance_type="trn1.32xlarge", output_uri="s3://b/runs/t", image="img")  # fmt: skip
BATCH_SPEC = ECS_SPEC.with_changes(nodes=2)


def backend_commands() -> list[tuple[str, JobSpec, list[str], dict[str, str]]]:
    """(label, spec, command a backend sends, node env) for an ECS task and each node of a 2-node Batch job."""
    ecs = ecs_definitions.container_overrides(container_plan(ECS_SPEC))["containerOverrides"][0]["command"]
    batch = batch_definitions.container_overrides(container_plan(BATCH_SPEC))["command"]
    nodes = [(f"batch node {i}", BATCH_SPEC, batch, batch_node_environment(2, i, 0, "10.0.3.7")) for i in (0, 1)]
    return [("ecs", ECS_SPEC, ecs, {}), *nodes]


@pytest.mark.process
@pytest.mark.parametrize("index", [0, 1, 2], ids=["ecs", "batch-node-0", "batch-node-1"])
def test_what_ecs_and_batch_send_runs_under_the_dockerfiles_entrypoint(index: int) -> None:
    label, spec, command, node_env = backend_commands()[index]
    entrypoint, cmd, shell = image_entry(DOCKERFILE.read_text())
    argv = docker_argv(entrypoint, cmd, command, shell=tuple(shell))
    assert argv == list(container_plan(spec).argv), f"{label}: the container would run {argv}"
    done = run_argv(argv, {**container_plan(spec).environment, **node_env})
    assert done.returncode == 0, f"{label}: {argv} exited {done.returncode}: {done.stderr[-2000:]}"
    torchrun = json.loads(done.stdout)
    assert torchrun[1:3] == ["-m", "torch.distributed.run" if spec.nodes > 1 else "trainium_trainer.loopback_torchrun"]
    assert f"--nnodes={spec.nodes}" in torchrun and f"--node_rank={index - 1 if index else 0}" in torchrun
    assert "--nproc_per_node=32" in torchrun
    assert torchrun[-4:] == ["--module", "trainium_trainer.mnist_mlp.train", "--epochs", "1"]
