"""The Batch queue a multi-node run is submitted to, and the compute environments behind it: each must be
able to start ``nodes`` instances of the type on demand, or the job waits in RUNNABLE while nothing says why."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from airflow_provider_trainium.hooks.connection_test import check_queues
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, verdict, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

QUEUE = "batch queue"
ENVIRONMENTS = "compute environment"


def _client(config: TrainiumConfig) -> Any:
    from airflow.providers.amazon.aws.hooks.batch_client import BatchClientHook

    return BatchClientHook(aws_conn_id=config.aws_conn_id, region_name=config.region_name).client


def _queue(client: Any, name: str) -> dict[str, Any] | None:
    queues = client.describe_job_queues(jobQueues=[name]).get("jobQueues", [])
    return queues[0] if queues else None


def queue_environments(config: TrainiumConfig, name: str) -> list[dict[str, Any]]:
    """The descriptions of queue ``name``'s compute environments (none when the queue is not found)."""
    client = _client(config)
    queue = _queue(client, name)
    arns = [o["computeEnvironment"] for o in (queue or {}).get("computeEnvironmentOrder", [])]
    if not arns:
        return []
    return list(client.describe_compute_environments(computeEnvironments=arns).get("computeEnvironments", []))


def check_batch_queue(config: TrainiumConfig, layout: Layout) -> CheckResult:
    name = config.batch_job_queues[layout.instance_type]
    only_this = dataclasses.replace(config, batch_job_queues={layout.instance_type: name})
    problems = check_queues(only_this)  # not found, not ENABLED, or INVALID/DELETING
    if problems:
        return error(QUEUE, "; ".join(problems))
    queue = _queue(_client(config), name) or {}
    if queue.get("status") != "VALID":
        return warning(QUEUE, f"Batch job queue {name} is {queue.get('status')}: {queue.get('statusReason', '')}")
    return ok(QUEUE, f"Batch job queue {name} ({layout.instance_type}) is ENABLED and VALID")


def environment_problems(environment: dict[str, Any], layout: Layout) -> tuple[list[str], list[str]]:
    """(errors, warnings) of one compute environment for ``layout``."""
    from airflow_provider_trainium.compute.batch.backend import SPOT_TYPES
    from airflow_provider_trainium.neuron.catalog import CATALOG
    from airflow_provider_trainium.neuron.releases import family

    name = environment["computeEnvironmentName"]
    found: list[str] = []
    if environment.get("state") != "ENABLED" or environment.get("status") != "VALID":
        reason = environment.get("statusReason")
        state = f"{environment.get('state')}/{environment.get('status')}"
        found.append(f"compute environment {name} is {state}" + (f" ({reason})" if reason else ""))
    resources = environment.get("computeResources")
    if not resources:  # UNMANAGED: its instances are whatever was registered by hand
        return found, [f"compute environment {name} is {environment.get('type')}: its instances are not checked"]
    types = list(resources.get("instanceTypes") or [])
    if layout.instance_type not in types and family(layout.instance_type) not in types:
        found.append(f"compute environment {name} does not offer {layout.instance_type} (instanceTypes: {types})")
    if layout.multi_node and resources.get("type") in SPOT_TYPES:
        found.append(
            f"compute environment {name} is {resources['type']}, and AWS Batch runs no multi-node parallel job on "
            "Spot: use an on-demand environment (the Batch stack's PurchaseOption on-demand)"
        )
    needed = layout.nodes * CATALOG[layout.instance_type].vcpus
    if int(resources.get("maxvCpus") or 0) < needed:
        found.append(
            f"compute environment {name} has maxvCpus {resources.get('maxvCpus')}, fewer than the {needed} vCPUs of "
            f"{layout.nodes} x {layout.instance_type}"
        )
    return found, []


def check_compute_environments(config: TrainiumConfig, layout: Layout) -> CheckResult:
    name = config.batch_job_queues[layout.instance_type]
    client = _client(config)
    queue = _queue(client, name)
    if queue is None:
        return warning(ENVIRONMENTS, f"not checked: Batch job queue {name} not found")
    arns = [o["computeEnvironment"] for o in sorted(queue.get("computeEnvironmentOrder", []), key=lambda o: o["order"])]
    if not arns:
        return error(ENVIRONMENTS, f"Batch job queue {name} has no compute environment")
    found = client.describe_compute_environments(computeEnvironments=arns).get("computeEnvironments", [])
    errors: list[str] = []
    warnings: list[str] = []
    missing = set(arns) - {e["computeEnvironmentArn"] for e in found} - {e["computeEnvironmentName"] for e in found}
    errors.extend(f"compute environment {arn} of queue {name} not found" for arn in sorted(missing))
    for environment in found:
        bad, doubtful = environment_problems(environment, layout)
        errors.extend(bad)
        warnings.extend(doubtful)
    names = ", ".join(e["computeEnvironmentName"] for e in found)
    return verdict(
        ENVIRONMENTS, f"{names}: ENABLED, VALID, room for {layout.nodes} x {layout.instance_type}", errors, warnings
    )
