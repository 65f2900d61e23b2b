"""A user's job in the launcher: ``--command`` argv."""

from __future__ import annotations

import pytest

from trainium_trainer import boundary
from trainium_trainer.launch import LaunchError, build_command

ENV = {boundary.ENV_NUM_NODES: "2", boundary.ENV_NODE_RANK: "1", boundary.ENV_MAIN_ADDR: "10.0.0.5"}


def test_a_command_runs_under_torchrun_without_python_and_with_this_interpreter():
    command = build_command(["--nodes=2", "--nproc-per-node=4", "--command", "--user-code", "--", "python",
                             "train.py", "--lr", "0.1"], ENV, python="/venv/bin/python")  # fmt: skip
    assert command[:3] == ["/venv/bin/python", "-m", "torch.distributed.run"]
    assert command[command.index("--no-python") :] == ["--no-python", "/venv/bin/python", "train.py", "--lr", "0.1"]
    assert "--module" not in command and "--node_rank=1" in command


def test_a_single_process_command_is_run_as_it_is():
    command = build_command(["--nodes=1", "--single-process", "--command", "--", "bash", "run.sh"], {})
    assert command == ["bash", "run.sh"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--nodes=1", "--single-process"], "--module (or --command) is required"),
        (["--nodes=1", "--single-process", "--command", "--"], "--command needs the command after --"),
    ],
)
def test_a_launch_without_anything_to_run_is_refused(argv, message):
    with pytest.raises(LaunchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_command(argv, {})
