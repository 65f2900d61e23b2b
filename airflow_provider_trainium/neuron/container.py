"""What a Trainium training container needs from its host, computed once for every backend.

ECS task definitions and Batch job definitions only render a :class:`ContainerShape`, so the two can
never give the same job different devices, limits or shared memory. The sources of each number are
listed in ``docs/fidelity.md`` ("Container shape and AWS infrastructure"); the ones no AWS document
gives are marked there as guesses.

- Devices: one ``/dev/neuronN`` per Trainium chip (neither ECS on EC2 nor Batch has a Neuron resource
  type), and for a multi-node job one ``/dev/infiniband/uverbsN`` per EFA interface, which also needs
  ``mknod`` (the Neuron Batch samples map them the same way).
- CPU and memory: the container owns the instance. One vCPU and ``max(2 GiB, 5 %)`` of the memory stay
  with the ECS agent, Docker and the OS, because ECS registers a little less memory than the nominal size
  and a job asking for all of it would never be placed.
- ``/dev/shm``: one eighth of host memory. tmpfs takes nothing until written and what is written counts
  against the container's memory limit, so a smaller cap would only add a second, earlier failure.
- Limits: unlimited ``memlock`` (the Neuron runtime and EFA pin host memory for DMA) with ``IPC_LOCK``,
  and a raised ``nofile`` for many ranks and data loader workers.

The environment is not decided here: :func:`plan.container_plan` pairs this shape with it, and every backend
renders that plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_trainium.neuron.catalog import InstanceType, get_instance_type

#: vCPUs left to the ECS agent, Docker and the Neuron monitor.
RESERVED_VCPUS = 1
#: Memory left to the OS and the agent: the larger of this share of the instance and the floor below.
MEMORY_HEADROOM_FRACTION = 0.05
MEMORY_HEADROOM_MIN_MIB = 2048
#: /dev/shm for data loader workers and the runtime: this fraction of host memory.
SHARED_MEMORY_DIVISOR = 8
NOFILE_LIMIT = 65535
UNLIMITED = -1
CAPABILITIES: tuple[str, ...] = ("IPC_LOCK",)


@dataclass(frozen=True)
class Device:
    """A host device mapped into the container at the same path."""

    path: str
    mknod: bool = False


@dataclass(frozen=True)
class Ulimit:
    name: str
    soft: int
    hard: int


@dataclass(frozen=True)
class ContainerShape:
    """Everything about a training container that depends only on its instance type and node count."""

    instance_type: str
    nodes: int
    devices: tuple[Device, ...]
    vcpus: int
    memory_mib: int
    shared_memory_mib: int
    ulimits: tuple[Ulimit, ...]
    capabilities: tuple[str, ...]
    efa: bool

    @property
    def cpu_units(self) -> int:
        """ECS counts CPU in units of 1/1024 vCPU."""
        return self.vcpus * 1024


def container_memory_mib(instance: InstanceType) -> int:
    """Instance memory minus headroom, rounded down to whole GiB."""
    total = instance.memory_gib * 1024
    headroom = max(MEMORY_HEADROOM_MIN_MIB, int(total * MEMORY_HEADROOM_FRACTION))
    return (total - headroom) // 1024 * 1024


def container_shape(instance_type: str, nodes: int = 1) -> ContainerShape:
    """The shape of one node's container; EFA devices only when the job spans nodes over EFA."""
    instance = get_instance_type(instance_type)
    if nodes < 1:
        raise ValueError(f"nodes must be >= 1, got {nodes}")
    efa = nodes > 1 and instance.multi_node
    devices = [Device(path) for path in instance.neuron_devices]
    if efa:
        devices += [Device(path, mknod=True) for path in instance.efa_devices]
    return ContainerShape(
        instance_type=instance.name,
        nodes=nodes,
        devices=tuple(devices),
        vcpus=instance.vcpus - RESERVED_VCPUS,
        memory_mib=container_memory_mib(instance),
        shared_memory_mib=instance.memory_gib * 1024 // SHARED_MEMORY_DIVISOR,
        ulimits=(Ulimit("memlock", UNLIMITED, UNLIMITED), Ulimit("nofile", NOFILE_LIMIT, NOFILE_LIMIT)),
        capabilities=CAPABILITIES,
        efa=efa,
    )
