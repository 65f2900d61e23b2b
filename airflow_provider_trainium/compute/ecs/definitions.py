"""ECS task definitions and RunTask overrides for Trainium: a job's container plan in ECS's words, no AWS call.

Everything comes from the :class:`~airflow_provider_trainium.neuron.plan.ContainerPlan`, the same one Batch
and local compute render: its shape (devices, CPU, memory, shared memory, ulimits, capabilities) and preset
environment go in the task definition, its command and run environment in the RunTask overrides. The task
is pinned to the instance type by a placement constraint.

So the task definition depends only on the job's layout, image, roles, log group and secret references, and
its family is named by a hash of its content: an unchanged definition is found and reused instead of registered
again, and a job with other secrets gets a definition of its own.

The job's secrets go in the container definition as ``secrets`` (name, ``valueFrom``), never in its
``environment``: RunTask's container overrides have no ``secrets`` field (ECS API reference,
ContainerOverride), and the ECS agent reads each one with the task execution role when the task starts. The
``valueFrom`` rule is the ECS API reference's (Secret): the full ARN of a Secrets Manager secret, or of an SSM
parameter, or a parameter's name when it lives in the task's Region (``neuron.secrets.value_from``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_trainium.compute.base import JobInputError
from airflow_provider_trainium.neuron.container import ContainerShape
from airflow_provider_trainium.neuron.plan import ContainerPlan
from airflow_provider_trainium.neuron.secrets import container_secrets

CONTAINER_NAME = "trainer"
LOG_STREAM_PREFIX = "trainium"
FAMILY_PREFIX = "trainium"
#: Seconds between SIGTERM and SIGKILL when a task is stopped (the EC2 maximum): time to flush a checkpoint.
STOP_TIMEOUT_SECONDS = 120
#: AWS caps the RunTask ``overrides`` document at 8192 characters.
MAX_OVERRIDES_CHARS = 8192


class EcsDefinitionError(JobInputError):
    """A task definition ECS would refuse or could not start: raised before it is registered."""


@dataclass(frozen=True)
class EcsTaskSettings:
    """What the ``trainium`` connection contributes to a task definition."""

    image: str
    log_group: str
    region_name: str
    execution_role_arn: str | None = None
    task_role_arn: str | None = None


def _name_values(env: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": env[k]} for k in sorted(env)]


def linux_parameters(shape: ContainerShape) -> dict[str, Any]:
    """The shape in ECS's words: lower-case device permissions, capabilities, shared memory."""
    return {
        "devices": [
            {
                "hostPath": d.path,
                "containerPath": d.path,
                "permissions": ["read", "write", "mknod"] if d.mknod else ["read", "write"],
            }
            for d in shape.devices
        ],
        "capabilities": {"add": list(shape.capabilities)},
        "sharedMemorySize": shape.shared_memory_mib,
        "initProcessEnabled": True,
    }


def ulimits(shape: ContainerShape) -> list[dict[str, Any]]:
    return [{"name": u.name, "softLimit": u.soft, "hardLimit": u.hard} for u in shape.ulimits]


def container_definition(plan: ContainerPlan, settings: EcsTaskSettings) -> dict[str, Any]:
    shape = plan.shape
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "essential": True,
        "cpu": shape.cpu_units,
        "memory": shape.memory_mib,
        "environment": _name_values(dict(plan.preset_environment)),
        "linuxParameters": linux_parameters(shape),
        "ulimits": ulimits(shape),
        "stopTimeout": STOP_TIMEOUT_SECONDS,
        "logConfiguration": {
            "logDriver": "awslogs",
            "options": {
                "awslogs-group": settings.log_group,
                "awslogs-region": settings.region_name,
                "awslogs-stream-prefix": LOG_STREAM_PREFIX,
            },
        },
    }
    if plan.spec.secrets:
        container["secrets"] = container_secrets(plan.spec.secrets)
    return container


def content_hash(body: dict[str, Any], length: int = 12) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


def task_definition(plan: ContainerPlan, settings: EcsTaskSettings) -> dict[str, Any]:
    """RegisterTaskDefinition arguments for the plan's layout, ``family`` included."""
    shape = plan.shape
    if plan.spec.secrets and not settings.execution_role_arn:
        # the ECS developer guide ("Amazon ECS task execution IAM role") requires one for secrets
        raise EcsDefinitionError(
            f"the job has secrets ({', '.join(sorted(plan.spec.secrets))}) but the trainium connection has no "
            "ecs_execution_role_arn: the ECS agent reads secrets with the task execution role"
        )
    body: dict[str, Any] = {
        "requiresCompatibilities": ["EC2"],
        "networkMode": "awsvpc",
        "cpu": str(shape.cpu_units),
        "memory": str(shape.memory_mib),
        "placementConstraints": [
            {"type": "memberOf", "expression": f"attribute:ecs.instance-type == {shape.instance_type}"}
        ],
        "containerDefinitions": [container_definition(plan, settings)],
    }
    if settings.execution_role_arn:
        body["executionRoleArn"] = settings.execution_role_arn
    if settings.task_role_arn:
        body["taskRoleArn"] = settings.task_role_arn
    family = f"{FAMILY_PREFIX}-{shape.instance_type.replace('.', '-')}-{content_hash(body)}"
    return {"family": family, **body}


def container_overrides(plan: ContainerPlan) -> dict[str, Any]:
    """RunTask ``overrides``: the launcher's arguments (the image's CMD) and the run's own environment."""
    container = {
        "name": CONTAINER_NAME,
        "command": list(plan.command),
        "environment": _name_values(dict(plan.run_environment)),
    }
    return {"containerOverrides": [container]}


def overrides_size(overrides: dict[str, Any]) -> int:
    return len(json.dumps(overrides, separators=(",", ":")))


def log_stream_name(task_id: str) -> str:
    """The awslogs stream of the training container: ``<prefix>/<container>/<task id>``."""
    return f"{LOG_STREAM_PREFIX}/{CONTAINER_NAME}/{task_id}"
