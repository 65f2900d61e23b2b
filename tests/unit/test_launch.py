import pytest

from airflow_provider_trainium.neuron.launch import (
    batch_node_environment,
    job_environment,
    node_command,
    torchrun_command,
)
from airflow_provider_trainium.neuron.spec import JobSpec


def spec(**changes):
    base = {"name": "job", "entry_point": "trainer.mnist_mlp.train", "args": ("--epochs", "2")}
    return JobSpec(**{**base, **changes})


@pytest.mark.parametrize(("nodes", "instance"), [(1, "trn1.2xlarge"), (2, "trn1.32xlarge"), (4, "trn1n.32xlarge")])
def test_torchrun_command_for_every_node(nodes, instance):
    s = spec(instance_type=instance, nodes=nodes)
    cores = s.instance.neuron_cores
    for rank in range(nodes):
        cmd = torchrun_command(s, node_rank=rank, master_addr="10.0.0.5")
        assert cmd[:3] == ["python", "-m", "torch.distributed.run"]
        assert f"--nnodes={nodes}" in cmd
        assert f"--node_rank={rank}" in cmd
        assert f"--nproc_per_node={cores}" in cmd
        assert "--master_addr=10.0.0.5" in cmd
        assert "--master_port=41000" in cmd
        assert cmd[-4:] == ["--module", "trainer.mnist_mlp.train", "--epochs", "2"]
    with pytest.raises(ValueError, match="node_rank must be in"):
        torchrun_command(s, node_rank=nodes, master_addr="10.0.0.5")


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_batch_environment_gives_the_main_address_to_children_only(nodes):
    for index in range(nodes):
        env = batch_node_environment(nodes, index, 0, "10.0.0.5")
        assert env["AWS_BATCH_JOB_NUM_NODES"] == str(nodes)
        assert env["AWS_BATCH_JOB_NODE_INDEX"] == str(index)
        assert env["AWS_BATCH_JOB_MAIN_NODE_INDEX"] == "0"
        assert ("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" in env) is (index != 0)


def test_efa_presets_only_for_multi_node_on_efa_instances():
    assert "FI_PROVIDER" not in job_environment(spec(instance_type="trn1.32xlarge", nodes=1))
    env = job_environment(spec(instance_type="trn1.32xlarge", nodes=2))
    assert (env["FI_PROVIDER"], env["FI_EFA_USE_DEVICE_RDMA"], env["FI_EFA_FORK_SAFE"]) == ("efa", "1", "1")


def test_environment_presets_and_overrides():
    env = job_environment(spec(workload="llm", env={"MALLOC_ARENA_MAX": "8"}, output_uri="s3://b/o"))
    assert env["NEURON_CC_FLAGS"] == "--model-type transformer --distribution-strategy=llm-training"
    assert env["MALLOC_ARENA_MAX"] == "8"  # the spec's own env wins
    assert env["TRAINIUM_OUTPUT_URI"] == "s3://b/o"
    assert "NEURON_RT_NUM_CORES" not in env  # torchrun jobs get one core per rank from torch-neuronx
    assert "XLA_USE_BF16" not in env
    assert job_environment(spec(distributed=False))["NEURON_RT_NUM_CORES"] == "1"


def test_wrapper_and_single_process_commands():
    compile_spec = spec(wrapper=("neuron_parallel_compile",))
    cmd = node_command(compile_spec, node_rank=0, master_addr="127.0.0.1")
    assert cmd[0] == "neuron_parallel_compile" and cmd[1:4] == ["python", "-m", "torch.distributed.run"]
    single = node_command(spec(distributed=False), node_rank=0, master_addr="x", python="/py")
    assert single == ["/py", "-m", "trainer.mnist_mlp.train", "--epochs", "2"]
