"""Trainium instance types: what each one offers to a training job.

Figures come from the AWS Neuron documentation and the EC2 instance pages. Prices live in one table,
:mod:`airflow_provider_trainium.neuron.pricing` (``price_of``), with their dates and sources and the user's
overrides; pricing reads this catalog, never the other way round.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_GENERATION = re.compile(r"^(trn\d+)")


class InstanceType(NamedTuple):
    """One instance type's figures. A named tuple, not a dataclass: DAG files import the catalog for their
    forms, and a tuple class costs a DAG parse a fifth of what a frozen dataclass does."""

    name: str
    chips: int
    neuron_cores: int
    efa_interfaces: int
    vcpus: int
    memory_gib: int
    chip_bf16_tflops: float
    max_nodes: int = 64
    #: Physical NeuronCores per logical core at the platform's default (LNC 2 on Trn2/Trn3): ``neuron_cores``
    #: counts logical cores, what the runtime shows a process and what torchrun gives one rank each.
    logical_core_size: int = 1

    @property
    def family(self) -> str:
        """``trn1n.32xlarge`` -> ``trn1n``: the EC2 instance family."""
        return self.name.split(".", 1)[0]

    @property
    def generation(self) -> str:
        """``trn1n.32xlarge`` -> ``trn1``: the Trainium generation, which decides the training stack."""
        return generation(self.name)

    @property
    def neuron_devices(self) -> tuple[str, ...]:
        """Host device paths the container must map: one ``/dev/neuronN`` per chip."""
        return tuple(f"/dev/neuron{i}" for i in range(self.chips))

    @property
    def efa_devices(self) -> tuple[str, ...]:
        """``/dev/infiniband/uverbsN`` for each EFA interface (empty where there is no EFA)."""
        return tuple(f"/dev/infiniband/uverbs{i}" for i in range(self.efa_interfaces))

    @property
    def multi_node(self) -> bool:
        """Multi-node training needs EFA between the nodes."""
        return self.efa_interfaces > 0

    @property
    def peak_bf16_tflops(self) -> float:
        """Dense BF16 peak of the whole instance, the denominator of MFU."""
        return self.chips * self.chip_bf16_tflops


CATALOG: dict[str, InstanceType] = {
    it.name: it
    for it in (
        InstanceType("trn1.2xlarge", 1, 2, 0, 8, 32, 190.0, max_nodes=1),
        InstanceType("trn1.32xlarge", 16, 32, 8, 128, 512, 190.0),
        InstanceType("trn1n.32xlarge", 16, 32, 16, 128, 512, 190.0),
        InstanceType("trn2.48xlarge", 16, 64, 16, 192, 2048, 667.0, logical_core_size=2),
        # One Trainium2 chip (4 logical cores at LNC 2), single-node: the Neuron Trn2 page says it has no EFA, the
        # EC2 specification table lists EFA on its one network card; the catalog takes the smaller claim
        # (docs/fidelity.md, "Trn2 instance types").
        InstanceType("trn2.3xlarge", 1, 4, 0, 12, 128, 667.0, max_nodes=1, logical_core_size=2),
        # A member of a Trn2 UltraServer (four of them joined by NeuronLink); the same server as trn2.48xlarge.
        InstanceType("trn2u.48xlarge", 16, 64, 16, 192, 2048, 667.0, logical_core_size=2),
        # One server of the Trn3 Gen1 UltraServer (16 Trainium3 chips); the name and EFA count are guesses
        # (docs/fidelity.md, "Trn3"). Announced, not launchable: see ``compute.remote.launch_problem``.
        InstanceType("trn3.48xlarge", 16, 64, 16, 192, 2048, 671.0, logical_core_size=2),
    )
}


def generation(instance_type: str) -> str:
    """The Trainium generation of an instance type name (``trn1``, ``trn2``, ``trn3``); the family when the
    name does not start with ``trn<N>``."""
    match = _GENERATION.match(instance_type)
    return match[1] if match else instance_type.split(".", 1)[0]


def get_instance_type(name: str) -> InstanceType:
    try:
        return CATALOG[name]
    except KeyError:
        allowed = ", ".join(sorted(CATALOG))
        raise ValueError(f"instance_type {name!r} is not a Trainium instance type; allowed: {allowed}") from None
