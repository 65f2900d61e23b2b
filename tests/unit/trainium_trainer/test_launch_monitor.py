"""The launcher starts the node's sampler next to every job, writing under the trainer's output URI."""

from __future__ import annotations

import os

import pytest

from trainium_trainer.launch import LaunchError, monitor_command

BATCH = {"AWS_BATCH_JOB_NUM_NODES": "2", "AWS_BATCH_JOB_NODE_INDEX": "1", "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
         "AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS": "10.0.0.5"}  # fmt: skip


def flags(command: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)


def test_output_uri_from_the_trainer_arguments_and_node_from_the_rendezvous() -> None:
    argv = [
        "--nodes=2",
        "--nproc-per-node=32",
        "--module=trainium_trainer.llama.train",
        "--",
        "--output-uri",
        "s3://b/run",
    ]
    command = monitor_command(argv, {**BATCH, "TRAINIUM_OUTPUT_URI": "s3://b/other"}, python="py")
    assert command[:3] == ["py", "-m", "trainium_trainer.common.monitor"]
    assert flags(command) == {"output-uri": "s3://b/run", "node": "1", "parent": str(os.getpid())}


def test_output_uri_from_the_environment() -> None:
    argv = ["--nodes=1", "--nproc-per-node=2", "--module=trainium_trainer.mnist_mlp.train", "--", "--epochs", "1"]
    command = monitor_command(argv, {"TRAINIUM_OUTPUT_URI": "file:///tmp/run"})
    assert flags(command)["output-uri"] == "file:///tmp/run" and flags(command)["node"] == "0"


@pytest.mark.parametrize(
    ("argv", "env"),
    [
        (["--nodes=1", "--nproc-per-node=2", "--module=m"], {}),  # nowhere to write
        # the project's own single-process step (data preparation): its output folder is data
        (
            ["--nodes=1", "--single-process", "--module=trainium_trainer.llama.prepare"],
            {"TRAINIUM_OUTPUT_URI": "s3://b/d"},
        ),
        (["--nodes=1", "--nproc-per-node=2", "--module=m", "--", "--output-uri=s3://b/r", "--compile-only"], {}),
        (
            ["--nodes=1", "--nproc-per-node=2", "--wrap=neuron_parallel_compile", "--module=m"],
            {"TRAINIUM_OUTPUT_URI": "s3://b/r"},
        ),
        (
            ["--nodes=1", "--nproc-per-node=2", "--module=m"],
            {"TRAINIUM_OUTPUT_URI": "s3://b/r", "TRAINIUM_MONITOR": "0"},
        ),
    ],
)
def test_no_sampler_without_output_for_project_data_steps_compile_trials_or_switched_off(
    argv: list[str], env: dict
) -> None:
    assert monitor_command(argv, env) is None


def test_a_multi_node_job_without_its_batch_variables_is_refused() -> None:
    with pytest.raises(LaunchError):
        monitor_command(["--nodes=2", "--nproc-per-node=2", "--module=m"], {"TRAINIUM_OUTPUT_URI": "s3://b/r"})


@pytest.mark.parametrize(
    "argv",
    [
        ["--nodes=1", "--single-process", "--user-code", "--module=my_project.train"],
        ["--nodes=1", "--single-process", "--user-code", "--command", "--", "python", "train.py"],
    ],
    ids=["module", "command"],
)
def test_a_single_process_users_job_gets_the_sampler_too(argv: list[str]) -> None:
    """``distributed=False`` is still a job on a paid node: its stream shows the node like any other's."""
    command = monitor_command(argv, {"TRAINIUM_OUTPUT_URI": "s3://b/run"}, python="py")
    assert command[:3] == ["py", "-m", "trainium_trainer.common.monitor"]
    assert flags(command) == {"output-uri": "s3://b/run", "node": "0", "parent": str(os.getpid())}
