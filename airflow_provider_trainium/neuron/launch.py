"""The environment each node of a job runs with.

The same functions serve every backend (see ``container_contract``, which pairs this environment with the
container's argv): ECS and Batch put it in the container definition and overrides, local compute gives it
to the launcher process it runs on this machine.
"""

from __future__ import annotations

from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

#: Runtime settings every Neuron training job wants (DESIGN.md section 4). torchrun jobs must not set
#: NEURON_RT_NUM_CORES: torch-neuronx gives each local rank its own core through NEURON_RT_VISIBLE_CORES.
BASE_ENV: dict[str, str] = {
    "MALLOC_ARENA_MAX": "64",
    "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS": "3",
    "NEURON_FUSE_SOFTMAX": "1",
    "PYTHONUNBUFFERED": "1",
}
EFA_ENV: dict[str, str] = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "FI_EFA_FORK_SAFE": "1"}
#: The interface the Neuron collectives bootstrap over in a multi-node container (aws-neuron-samples sets it
#: next to the EFA variables in its containerised multi-node launch scripts; see docs/fidelity.md). Multi-node
#: Batch jobs run in awsvpc mode, where the task's interface is eth0. Single-node jobs leave it unset.
MULTI_NODE_ENV: dict[str, str] = {"CCOM_SOCKET_IFNAME": "eth0"}
#: neuronx-cc flags the PyTorch/XLA stack's LLM training guides set (docs/fidelity.md); the native stack's
#: variable reference names no NEURON_CC_FLAGS, so native jobs run without them.
LLM_ENV: dict[str, str] = {"NEURON_CC_FLAGS": "--model-type transformer --distribution-strategy=llm-training"}


def preset_environment(image: str | None, stack: str = boundary.STACK_XLA) -> dict[str, str]:
    """``BASE_ENV`` less the variables the image's Neuron runtime deprecates (the release table says which). An
    image that says nothing of its release, or names another stack's, is taken for ``stack``'s own image."""
    from airflow_provider_trainium.neuron.releases import image_runtime, table

    release = image_runtime(image).release
    if release is None or release.stack != stack:
        release = table().image_for(stack)
    return {name: value for name, value in BASE_ENV.items() if name not in release.deprecated_env}


def layout_environment(spec: JobSpec) -> dict[str, str]:
    """What every run of this layout and image shares: presets, then what the layout adds (no per-run values)."""
    env = preset_environment(spec.image, spec.stack)
    if not spec.distributed:
        env["NEURON_RT_NUM_CORES"] = "1"
    if spec.nodes > 1 and spec.instance.multi_node:
        env.update(EFA_ENV)
        env.update(MULTI_NODE_ENV)
    if spec.workload == "llm" and spec.stack == boundary.STACK_XLA:
        env.update(LLM_ENV)  # flags of the XLA stack's LLM training docs; no TorchNeuron page names them
    if spec.tensor_parallel_size > 1:
        env[boundary.ENV_TENSOR_PARALLEL_SIZE] = str(spec.tensor_parallel_size)
    env[boundary.ENV_INSTANCE_TYPE] = spec.instance_type
    env[boundary.ENV_STACK] = spec.stack
    return env


def run_environment(spec: JobSpec) -> dict[str, str]:
    """What one run adds: its checkpoint and output locations, then the spec's own env (which wins)."""
    env: dict[str, str] = {}
    if spec.checkpoint_uri:
        env[boundary.ENV_CHECKPOINT_URI] = spec.checkpoint_uri
    if spec.output_uri:
        env[boundary.ENV_OUTPUT_URI] = spec.output_uri
    if spec.code_uri:
        env[boundary.ENV_CODE_URI] = spec.code_uri
    env.update(spec.env)
    return env


def job_environment(spec: JobSpec) -> dict[str, str]:
    """Environment shared by all nodes: the layout's, then the run's own (which wins)."""
    return {**layout_environment(spec), **run_environment(spec)}


#: The neutral rendezvous contract ``trainium_trainer.launch`` reads. Each backend maps its platform's variables
#: onto it: local compute sets these directly; on AWS Batch the launcher maps ``AWS_BATCH_JOB_*`` inside the container.
RENDEZVOUS_VARIABLES = boundary.RENDEZVOUS_ENV


def rendezvous_environment(
    num_nodes: int, node_rank: int, main_address: str, main_port: int | None = None
) -> dict[str, str]:
    """The neutral rendezvous of node ``node_rank``: every node gets the main node's address (rank 0)."""
    if not 0 <= node_rank < num_nodes:
        raise ValueError(f"node_rank must be in [0, {num_nodes}), got {node_rank}")
    env = {
        boundary.ENV_NUM_NODES: str(num_nodes),
        boundary.ENV_NODE_RANK: str(node_rank),
        boundary.ENV_MAIN_ADDR: main_address,
    }
    if main_port is not None:
        env[boundary.ENV_MAIN_PORT] = str(main_port)
    return env


def batch_node_environment(
    num_nodes: int, node_index: int, main_node_index: int = 0, main_node_address: str | None = None
) -> dict[str, str]:
    """The AWS_BATCH_JOB_* variables Batch sets on a multi-node parallel job's node.

    Batch gives the main node address to the children only; the main node uses its own address.
    """
    if not 0 <= node_index < num_nodes:
        raise ValueError(f"node_index must be in [0, {num_nodes}), got {node_index}")
    env = {
        "AWS_BATCH_JOB_NUM_NODES": str(num_nodes),
        "AWS_BATCH_JOB_NODE_INDEX": str(node_index),
        "AWS_BATCH_JOB_MAIN_NODE_INDEX": str(main_node_index),
    }
    if node_index != main_node_index and main_node_address:
        env["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"] = main_node_address
    return env
