"""Trainium instance types: what each one offers to a training job.

Figures come from the AWS Neuron documentation and the EC2 instance pages. Prices are the public
on-demand list prices in us-east-1 on ``PRICES_AS_OF``; pass ``prices=`` to :func:`hourly_price` to use
your own (reserved, savings plan, other region).
"""

from __future__ import annotations

from dataclasses import dataclass

PRICES_AS_OF = "2026-11-01"


@dataclass(frozen=True)
class InstanceType:
    name: str
    chips: int
    neuron_cores: int
    efa_interfaces: int
    vcpus: int
    memory_gib: int
    chip_bf16_tflops: float
    on_demand_usd_per_hour: float
    max_nodes: int = 64

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
        InstanceType("trn1.2xlarge", 1, 2, 0, 8, 32, 190.0, 1.34, max_nodes=1),
        InstanceType("trn1.32xlarge", 16, 32, 8, 128, 512, 190.0, 21.50),
        InstanceType("trn1n.32xlarge", 16, 32, 16, 128, 512, 190.0, 24.78),
        InstanceType("trn2.48xlarge", 16, 64, 16, 192, 2048, 667.0, 46.00),
    )
}


def get_instance_type(name: str) -> InstanceType:
    try:
        return CATALOG[name]
    except KeyError:
        allowed = ", ".join(sorted(CATALOG))
        raise ValueError(f"instance_type {name!r} is not a Trainium instance type; allowed: {allowed}") from None


def hourly_price(name: str, nodes: int = 1, prices: dict[str, float] | None = None) -> float:
    """On-demand cost of ``nodes`` instances for one hour, in USD."""
    table = prices or {k: v.on_demand_usd_per_hour for k, v in CATALOG.items()}
    return table[name] * nodes
