"""The ``capacity`` preflight check: the layout against the account's On-Demand Trn vCPU quota and, on Batch,
its queue's compute environments (``compute.capacity`` holds the rules, which the backends also apply at submit).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_trainium.compute.capacity import TRN_ON_DEMAND_QUOTA, needed_vcpus, placement_findings, trn_quota

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
    from airflow_provider_trainium.preflight.layout import Layout
    from airflow_provider_trainium.preflight.result import CheckResult


CAPACITY = "capacity"


def check_capacity(config: TrainiumConfig, layout: Layout) -> CheckResult:
    """The ``capacity`` preflight check: an error when the layout can never be placed, a warning when it must
    wait or when Service Quotas does not know the quota."""
    from airflow_provider_trainium.preflight.batch import queue_environments
    from airflow_provider_trainium.preflight.result import verdict

    queue = config.batch_job_queues.get(layout.instance_type) if layout.compute == "batch" else None
    environments = queue_environments(config, queue) if queue else []
    quota = trn_quota(config)
    found = placement_findings(quota, layout.instance_type, layout.nodes, queue, environments)
    within = []
    if quota is None:
        found.warnings.append(
            f"quota {TRN_ON_DEMAND_QUOTA[1]} (On-Demand Trn vCPUs) is not known to Service Quotas: not checked"
        )
    else:
        within.append(f"quota {quota.value:g} ({quota.in_use or 0:g} in use)")
    if queue:
        within.append(f"the compute environments of queue {queue}")
    needed = needed_vcpus(layout.instance_type, layout.nodes)
    reason = f"{needed} vCPUs for {layout.nodes} x {layout.instance_type}, within " + " and ".join(within)
    return verdict(CAPACITY, reason, found.errors, found.warnings)
