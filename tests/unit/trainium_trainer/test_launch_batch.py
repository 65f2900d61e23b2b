"""The in-container launcher turns AWS Batch's node variables (through its adapter) into a torchrun command."""

import json
import subprocess
import sys

import pytest

from trainium_trainer import launch

ARGV = ["--nodes=4", "--nproc-per-node=32", "--module=trainium_trainer.allreduce", "--", "--bandwidth-mb", "64"]


def batch_env(node_index: int, main_address: str = "10.0.1.17") -> dict[str, str]:
    """The variables Batch sets on node ``node_index`` of a 4-node job (the main node gets no address)."""
    env = {
        "AWS_BATCH_JOB_NUM_NODES": "4",
        "AWS_BATCH_JOB_NODE_INDEX": str(node_index),
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": "0",
        "AWS_BATCH_JOB_ID": f"abc#{node_index}",
    }
    if node_index != 0:
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = main_address
    return env


def flags(command: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)


def test_main_node_uses_its_own_address():
    command = launch.build_command(ARGV, batch_env(0), python="python")
    assert command[:3] == ["python", "-m", "torch.distributed.run"]
    f = flags(command)
    assert f["nnodes"] == "4" and f["node_rank"] == "0" and f["nproc_per_node"] == "32"
    assert f["master_addr"] == launch.own_address() and f["master_port"] == "41000"
    assert command[command.index("--module") + 1 :] == ["trainium_trainer.allreduce", "--bandwidth-mb", "64"]


def test_child_node_uses_the_main_node_address():
    f = flags(launch.build_command(ARGV, batch_env(2), python="python"))
    assert f["node_rank"] == "2" and f["master_addr"] == "10.0.1.17" and f["nproc_per_node"] == "32"


@pytest.mark.parametrize(
    ("missing", "argv"),
    [
        ("AWS_BATCH_JOB_NODE_INDEX", ARGV),
        ("AWS_BATCH_JOB_NUM_NODES", ARGV),
        ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS", ARGV),
        ("--nproc-per-node", [a for a in ARGV if not a.startswith("--nproc")]),
    ],
)
def test_missing_variable_fails_fast_naming_it(missing, argv):
    env = batch_env(2)
    env.pop(missing, None)
    with pytest.raises(launch.LaunchError, match=missing):
        launch.build_command(argv, env)


def test_explicit_nproc_wins_and_node_count_must_match():
    f = flags(launch.build_command(["--nodes=4", "--nproc-per-node=8", "--module=m"], batch_env(1)))
    assert f["nproc_per_node"] == "8"
    mismatch = r"TRAINIUM_NUM_NODES=4 \(from aws-batch\) but the job was built for --nodes=2"
    with pytest.raises(launch.LaunchError, match=mismatch):
        launch.build_command(["--nodes=2", "--nproc-per-node=8", "--module=m"], batch_env(1))


def test_no_instance_catalog_in_the_trainer():
    """Processes per node come from the job's arguments only; an instance type in the env changes nothing."""
    assert not hasattr(launch, "NEURON_CORES")
    env = {**batch_env(1), "TRAINIUM_INSTANCE_TYPE": "trn2.48xlarge"}
    assert flags(launch.build_command(ARGV, env))["nproc_per_node"] == "32"


def test_local_rendezvous_pins_the_address_port_and_rank_logs():
    env = {**batch_env(0), "TRAINIUM_MASTER_ADDR": "127.0.0.1", "TRAINIUM_MASTER_PORT": "5123",
           "TRAINIUM_RANK_LOG_DIR": "/tmp/ranks"}  # fmt: skip
    command = launch.build_command(ARGV, env, python="python")
    f = flags(command)
    assert (f["master_addr"], f["master_port"], f["log-dir"]) == ("127.0.0.1", "5123", "/tmp/ranks")
    assert "--tee=3" in command and command[1:3] == ["-m", "trainium_trainer.loopback_torchrun"]


@pytest.mark.process
def test_runs_as_a_module_without_airflow_or_the_provider():
    code = (
        "import json, sys, runpy\n"
        "sys.argv = ['launch', '--dry-run', *json.loads(sys.argv[1])]\n"
        "runpy.run_module('trainium_trainer.launch', run_name='__main__')\n"
        "print(json.dumps(sorted(m for m in ('airflow', 'airflow_provider_trainium', 'torch') if m in sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, json.dumps(ARGV)], env=batch_env(2), capture_output=True,
                          text=True, check=True)  # fmt: skip
    command_line, modules_line = done.stdout.strip().splitlines()
    assert flags(json.loads(command_line))["master_addr"] == "10.0.1.17"
    assert json.loads(modules_line) == []
    failed = subprocess.run([sys.executable, "-m", "trainium_trainer.launch", *ARGV], env={"PATH": "/usr/bin"},
                            capture_output=True, text=True)  # fmt: skip
    assert failed.returncode == 65 and "TRAINIUM_NUM_NODES is not set" in failed.stderr
