"""AWS Batch job definitions and submit requests: a job's container plan in Batch's words; no AWS calls here.

What belongs in the definition is what stays the same from run to run of a task (image, the plan's shape and
preset environment, logs, timeout, retry policy), so every run of a DAG reuses one definition. What changes
per run (the plan's command and run environment) goes into the submit request's overrides, which are checked
against the definition before anything is submitted.

The job's secrets go in the container properties as ``secrets`` (name, ``valueFrom``), the single node's and
every node range's: the submit request's overrides have no ``secrets`` field (Batch API reference,
ContainerOverrides), and the agent reads them with the execution role when the container starts. The
``valueFrom`` rule is the Batch API reference's (Secret), the same as ECS's: the full ARN of a Secrets Manager
secret or of an SSM parameter, or a parameter's name in the job's Region (``neuron.secrets.value_from``).
A different set of secrets is a different body, so a definition of its own (``definition_name``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_trainium.neuron.container import ContainerShape
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.secrets import container_secrets

#: Batch retries a job itself only when its host went away (spot reclaim, EC2 failure); Airflow retries the rest.
HOST_RETRY_ATTEMPTS = 3
DEFINITION_PREFIX = "trainium"


class BatchDefinitionError(ValueError):
    """A spec or override that Batch would reject (or run wrongly): raised before any API call."""


@dataclass(frozen=True)
class BatchSettings:
    """The parts of the ``trainium`` connection a job definition needs."""

    region_name: str | None = None
    log_group: str | None = None
    job_role_arn: str | None = None
    execution_role_arn: str | None = None
    privileged: bool = False
    host_retry_attempts: int = HOST_RETRY_ATTEMPTS


def device_mappings(shape: ContainerShape) -> list[dict[str, Any]]:
    """The shape's devices in Batch's words (upper-case permissions; MKNOD for the EFA uverbs devices)."""
    return [
        {
            "hostPath": d.path,
            "containerPath": d.path,
            "permissions": ["READ", "WRITE", "MKNOD"] if d.mknod else ["READ", "WRITE"],
        }
        for d in shape.devices
    ]


def retry_strategy(attempts: int) -> dict[str, Any]:
    """Retry lost hosts (``Host EC2 (instance i-...) terminated.``: spot reclaim or hardware); exit on the rest.

    Application errors are not retried by Batch: the Airflow task's retries decide, and exit code 65 (bad
    input) is never retried there either.
    """
    return {
        "attempts": attempts,
        "evaluateOnExit": [
            {"onStatusReason": "Host EC2*", "action": "RETRY"},
            {"onReason": "*", "action": "EXIT"},
        ],
    }


def log_configuration(settings: BatchSettings) -> dict[str, Any] | None:
    """awslogs into the connection's log group; None keeps Batch's default group ``/aws/batch/job``."""
    if not settings.log_group:
        return None
    options = {"awslogs-group": settings.log_group}
    if settings.region_name:
        options["awslogs-region"] = settings.region_name
    return {"logDriver": "awslogs", "options": options}


def container_properties(plan: ContainerPlan, settings: BatchSettings) -> dict[str, Any]:
    """The plan's :class:`ContainerShape` and preset environment in Batch's words.

    ``instanceType`` is set for multi-node jobs only: the Batch API reference (ContainerProperties) says it
    isn't applicable to single-node container jobs and shouldn't be provided for them.
    """
    spec, shape = plan.spec, plan.shape
    props: dict[str, Any] = {
        "image": spec.image,
        "resourceRequirements": [
            {"type": "VCPU", "value": str(shape.vcpus)},
            {"type": "MEMORY", "value": str(shape.memory_mib)},
        ],
        "linuxParameters": {
            "devices": device_mappings(shape),
            "sharedMemorySize": shape.shared_memory_mib,
            "initProcessEnabled": True,
        },
        "ulimits": [{"name": u.name, "softLimit": u.soft, "hardLimit": u.hard} for u in shape.ulimits],
        "environment": [{"name": k, "value": v} for k, v in sorted(plan.preset_environment.items())],
        # Batch has no per-capability field: the shape's IPC_LOCK only comes with privileged mode. The
        # unlimited memlock above is what EFA's memory registration needs; ``privileged`` is an opt-in.
        "privileged": settings.privileged,
    }
    if spec.nodes > 1:
        props["instanceType"] = shape.instance_type
    if spec.secrets:
        props["secrets"] = container_secrets(spec.secrets)
    logs = log_configuration(settings)
    if logs:
        props["logConfiguration"] = logs
    if settings.job_role_arn:
        props["jobRoleArn"] = settings.job_role_arn
    if settings.execution_role_arn:
        props["executionRoleArn"] = settings.execution_role_arn
    return props


def definition_body(plan: ContainerPlan, settings: BatchSettings) -> dict[str, Any]:
    """The RegisterJobDefinition request without its name: ``multinode`` for N > 1 nodes, else ``container``."""
    spec = plan.spec
    problems = []
    if not spec.image:
        problems.append("no image: set the operator's `image` or the trainium connection's `image`")
    if spec.nodes > 1 and not spec.instance.multi_node:
        problems.append(
            f"{spec.instance_type} has no EFA and cannot run a {spec.nodes}-node job; use trn1.32xlarge, "
            "trn1n.32xlarge or trn2.48xlarge"
        )
    if spec.secrets and not settings.execution_role_arn:
        # the Batch user guide ("Specify sensitive data with Secrets Manager", IAM permissions) requires one
        problems.append(
            f"the job has secrets ({', '.join(sorted(spec.secrets))}) but the trainium connection has no "
            "ecs_execution_role_arn: Batch reads secrets with the execution role"
        )
    if problems:
        raise BatchDefinitionError("cannot build a Batch job definition: " + "; ".join(problems))
    props = container_properties(plan, settings)
    body: dict[str, Any] = {
        "retryStrategy": retry_strategy(settings.host_retry_attempts),
        "timeout": {"attemptDurationSeconds": spec.timeout_seconds},
        "propagateTags": True,
        "platformCapabilities": ["EC2"],
    }
    if spec.nodes > 1:
        body["type"] = "multinode"
        body["nodeProperties"] = {
            "numNodes": spec.nodes,
            "mainNode": 0,
            "nodeRangeProperties": [{"targetNodes": "0:", "container": props}],
        }
    else:
        body["type"] = "container"
        body["containerProperties"] = props
    return body


def definition_name(plan: ContainerPlan, body: dict[str, Any]) -> str:
    """``trainium-<instance>-<N>x-<hash of the body>``: equal content, equal name, one definition."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    return f"{DEFINITION_PREFIX}-{plan.shape.instance_type.replace('.', '-')}-{plan.shape.nodes}x-{digest}"


def build_job_definition(plan: ContainerPlan, settings: BatchSettings) -> dict[str, Any]:
    """The full RegisterJobDefinition request for the plan."""
    body = definition_body(plan, settings)
    return {"jobDefinitionName": definition_name(plan, body), **body}


def container_overrides(plan: ContainerPlan) -> dict[str, Any]:
    """What every node's container is sent: the launcher's arguments (the image's CMD) and the run's env."""
    return {
        "command": list(plan.command),
        "environment": [{"name": k, "value": v} for k, v in sorted(plan.run_environment.items())],
    }


def submit_request(
    plan: ContainerPlan, *, job_name: str, job_queue: str, job_definition: str, tags: dict[str, str]
) -> dict[str, Any]:
    """The SubmitJob request: run-specific command and env as overrides, tags for finding the job again."""
    request: dict[str, Any] = {
        "jobName": job_name,
        "jobQueue": job_queue,
        "jobDefinition": job_definition,
        "tags": dict(tags),
        "propagateTags": True,
    }
    if plan.shape.nodes > 1:
        request["nodeOverrides"] = {
            "nodePropertyOverrides": [{"targetNodes": "0:", "containerOverrides": container_overrides(plan)}]
        }
    else:
        request["containerOverrides"] = container_overrides(plan)
    return request


def _node_range(target: str, num_nodes: int) -> range:
    start, sep, end = target.partition(":")
    try:
        first = int(start) if start else 0
        last = (int(end) if end else num_nodes - 1) if sep else first
    except ValueError:
        raise BatchDefinitionError(f"targetNodes {target!r} is not of the form 'i', 'i:j', 'i:' or ':j'") from None
    if not 0 <= first <= last < num_nodes:
        raise BatchDefinitionError(f"targetNodes {target!r} is outside nodes 0..{num_nodes - 1}")
    return range(first, last + 1)


def validate_node_overrides(definition: dict[str, Any], request: dict[str, Any]) -> None:
    """Reject a SubmitJob request whose node overrides do not fit the registered definition.

    Batch fails such a job only after it was queued ("NodeOverride targets should match"); this says
    what is wrong before submitting. Each override must target exactly one node range of the definition.
    """
    overrides = request.get("nodeOverrides")
    if definition.get("type") != "multinode":
        if overrides:
            raise BatchDefinitionError("nodeOverrides given for a single-node (container) job definition")
        return
    if request.get("containerOverrides"):
        raise BatchDefinitionError("a multinode job takes nodeOverrides, not containerOverrides")
    props = definition["nodeProperties"]
    num_nodes = int(props["numNodes"])
    if overrides and overrides.get("numNodes") not in (None, num_nodes):
        raise BatchDefinitionError(
            f"nodeOverrides.numNodes={overrides['numNodes']} differs from the definition's numNodes={num_nodes}: "
            "register a definition for that node count instead"
        )
    ranges = {r["targetNodes"]: _node_range(r["targetNodes"], num_nodes) for r in props["nodeRangeProperties"]}
    covered = sorted(i for r in ranges.values() for i in r)
    if covered != list(range(num_nodes)):
        raise BatchDefinitionError(f"the definition's node ranges {sorted(ranges)} do not cover nodes once each")
    seen: set[str] = set()
    for override in (overrides or {}).get("nodePropertyOverrides", []):
        target = override.get("targetNodes", "")
        nodes = _node_range(target, num_nodes)
        match = next((name for name, r in ranges.items() if r == nodes), None)
        if match is None:
            raise BatchDefinitionError(
                f"node override targetNodes {target!r} matches none of the definition's node ranges "
                f"{sorted(ranges)}; Batch would fail the job with 'NodeOverride targets should match'"
            )
        if match in seen:
            raise BatchDefinitionError(f"two node overrides target the same node range {match!r}")
        seen.add(match)
