"""The container contract: what every node's container runs, and the environment it gets."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_trainium.compute.batch import definitions as batch_definitions
from airflow_provider_trainium.compute.ecs import definitions as ecs_definitions
from airflow_provider_trainium.neuron.container_contract import (
    IMAGE_ENTRYPOINT,
    docker_argv,
    launcher_arguments,
)
from airflow_provider_trainium.neuron.launch import batch_node_environment, job_environment
from airflow_provider_trainium.neuron.plan import container_plan
from airflow_provider_trainium.neuron.spec import JobSpec

REPO = Path(__file__).resolve().parents[3]


def spec(**changes):
    base = {"name": "job", "entry_point": "trainium_trainer.mnist_mlp.train", "args": ("--epochs", "2")}
    return JobSpec(**{**base, **changes})


def dry_run(argv: list[str], env: dict[str, str]) -> list[str]:
    """Run the container argv (with this interpreter for ``python``) in dry-run mode; the command it would exec."""
    run_env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "TRAINIUM_LAUNCH_DRY_RUN": "1", **env}
    done = subprocess.run([sys.executable, *argv[1:]], env=run_env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def flags(command: list[str]) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in command if a.startswith("--") and "=" in a)


@pytest.mark.process
@pytest.mark.parametrize(("nodes", "instance"), [(1, "trn1.2xlarge"), (2, "trn1.32xlarge"), (4, "trn1n.32xlarge")])
def test_every_node_runs_torchrun_for_its_rank(nodes, instance):
    s = spec(instance_type=instance, nodes=nodes)
    argv = list(container_plan(s).argv)
    assert argv[: len(IMAGE_ENTRYPOINT)] == list(IMAGE_ENTRYPOINT)
    for rank in range(nodes):
        env = {**job_environment(s), **batch_node_environment(nodes, rank, 0, "10.0.0.5")}
        command = dry_run(argv, env)
        # a one-node job rendezvous on loopback, where the store must listen on loopback only
        assert command[1:3] == ["-m", "trainium_trainer.loopback_torchrun" if nodes == 1 else "torch.distributed.run"]
        f = flags(command)
        assert (f["nnodes"], f["node_rank"]) == (str(nodes), str(rank))
        assert f["nproc_per_node"] == str(s.instance.neuron_cores)  # from the job, not a catalog copy
        assert f["master_port"] == "41000"
        if rank:
            assert f["master_addr"] == "10.0.0.5"
        assert command[-4:] == ["--module", "trainium_trainer.mnist_mlp.train", "--epochs", "2"]


def test_ecs_and_batch_send_exactly_the_launcher_arguments():
    single, multi = spec(instance_type="trn1.32xlarge"), spec(instance_type="trn1.32xlarge", nodes=2)
    ecs = ecs_definitions.container_overrides(container_plan(single))["containerOverrides"][0]["command"]
    batch_single = batch_definitions.container_overrides(container_plan(single))["command"]
    assert ecs == batch_single == launcher_arguments(single)
    assert batch_definitions.container_overrides(container_plan(multi))["command"] == launcher_arguments(multi)
    assert not any(word in ("python", "-m", "trainium_trainer.launch") for word in ecs)


def test_docker_rule_appends_the_command_to_an_exec_form_entrypoint():
    assert docker_argv(["a", "b"], ["c"], None) == ["a", "b", "c"]  # no command: the image's CMD
    assert docker_argv(["a", "b"], ["c"], ["d", "e"]) == ["a", "b", "d", "e"]  # the command replaces CMD
    assert docker_argv("run me", ["c"], ["d"], shell=("/bin/bash", "-c")) == ["/bin/bash", "-c", "run me"]


@pytest.mark.process
def test_wrapper_and_single_process_jobs():
    compile_spec = spec(wrapper=("neuron_parallel_compile",))
    command = dry_run(list(container_plan(compile_spec).argv), {})
    assert command[0] == "neuron_parallel_compile" and command[2:4] == ["-m", "trainium_trainer.loopback_torchrun"]
    single = dry_run(list(container_plan(spec(distributed=False)).argv), {})
    assert single[1:] == ["-m", "trainium_trainer.mnist_mlp.train", "--epochs", "2"]


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_batch_environment_gives_the_main_address_to_children_only(nodes):
    for index in range(nodes):
        env = batch_node_environment(nodes, index, 0, "10.0.0.5")
        assert env["AWS_BATCH_JOB_NUM_NODES"] == str(nodes)
        assert env["AWS_BATCH_JOB_NODE_INDEX"] == str(index)
        assert env["AWS_BATCH_JOB_MAIN_NODE_INDEX"] == "0"
        assert ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" in env) is (index != 0)


def test_efa_and_collective_interface_only_for_multi_node_on_efa_instances():
    single = job_environment(spec(instance_type="trn1.32xlarge", nodes=1))
    assert "FI_PROVIDER" not in single and "CCOM_SOCKET_IFNAME" not in single
    env = job_environment(spec(instance_type="trn1.32xlarge", nodes=2))
    assert (env["FI_PROVIDER"], env["FI_EFA_USE_DEVICE_RDMA"], env["FI_EFA_FORK_SAFE"]) == ("efa", "1", "1")
    assert env["CCOM_SOCKET_IFNAME"] == "eth0"


@pytest.mark.parametrize("stack", ["xla", "native"])
def test_the_layout_tells_the_trainer_its_stack_on_every_backend(stack):
    s = spec(instance_type="trn2.48xlarge", nodes=2, stack=stack, image="acct.dkr.ecr.us-east-1.amazonaws.com/t:1")
    plan = container_plan(s)
    assert plan.preset_environment["TRAINIUM_STACK"] == stack == plan.environment["TRAINIUM_STACK"]  # local
    assert "TRAINIUM_STACK" not in plan.run_environment  # a layout's value: in the definitions, not the overrides


def test_environment_presets_and_overrides():
    env = job_environment(spec(workload="llm", env={"MALLOC_ARENA_MAX": "8"}, output_uri="s3://b/o"))
    assert env["NEURON_CC_FLAGS"] == "--model-type transformer --distribution-strategy=llm-training"
    assert env["MALLOC_ARENA_MAX"] == "8"  # the spec's own env wins
    assert env["TRAINIUM_OUTPUT_URI"] == "s3://b/o"
    assert "NEURON_RT_NUM_CORES" not in env  # torchrun jobs get one core per rank from torch-neuronx
    assert "XLA_USE_BF16" not in env
    assert job_environment(spec(distributed=False))["NEURON_RT_NUM_CORES"] == "1"


@pytest.mark.parametrize("image", [None, "acct.dkr.ecr.us-east-1.amazonaws.com/t:1"])
def test_a_native_job_gets_neither_the_deprecated_async_variable_nor_the_xla_llm_flags(image):
    """Implicit async is legacy from Neuron 2.29 and the LLM flags are the XLA stack's: both stay off the native
    stack, whether or not its image says which release it carries; an XLA job of the same layout keeps both."""
    native = job_environment(spec(workload="llm", stack="native", instance_type="trn2.48xlarge", image=image))
    xla = job_environment(spec(workload="llm", stack="xla", instance_type="trn2.48xlarge", image=image))
    assert "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS" not in native and "NEURON_CC_FLAGS" not in native
    assert xla["NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS"] == "3" and "NEURON_CC_FLAGS" in xla
