"""The run params every Trainium DAG shares, with the JSON Schema that drives the UI trigger form."""

from __future__ import annotations

from airflow.sdk import Param

from airflow_provider_trainium.neuron.catalog import CATALOG

COMPUTE_DESCRIPTION = "auto: local without a trainium_default connection, ECS for 1 node, Batch for more"


def layout_params(instance_type: str = "trn1.2xlarge", nodes: int = 1) -> dict[str, Param]:
    """``compute``, ``instance_type`` and ``nodes``; the cross-field rules are checked by ``check_layout``."""
    return {
        "compute": Param("auto", enum=["auto", "local", "ecs", "batch"], description=COMPUTE_DESCRIPTION),
        "instance_type": Param(instance_type, enum=sorted(CATALOG)),
        "nodes": Param(nodes, type="integer", minimum=1, maximum=max(i.max_nodes for i in CATALOG.values())),
    }
