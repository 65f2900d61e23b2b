"""The run's layout as preflight sees it: what was asked for, with ``compute`` already resolved."""

from __future__ import annotations

from dataclasses import dataclass

LOCAL = "local"


@dataclass(frozen=True)
class Layout:
    instance_type: str
    nodes: int
    #: A backend name (``auto`` already resolved by ``resolve_compute``).
    compute: str
    #: The image to run: the caller's, else the connection's; None when the DAG builds one.
    image: str | None
    #: The EC2 Capacity Reservation the run uses (``cr-...``): its mapped queue or cluster is checked.
    capacity_reservation: str | None = None

    @property
    def remote(self) -> bool:
        return self.compute != LOCAL

    @property
    def multi_node(self) -> bool:
        return self.nodes > 1
