"""ECS task definitions and RunTask overrides for Trainium, built from a job spec without calling AWS.

Devices, CPU, memory, shared memory, ulimits and capabilities are the instance type's
:class:`~airflow_provider_trainium.neuron.container.ContainerShape`, the same one Batch renders; here it is
only written in ECS's field names. The task is pinned to the instance type by a placement constraint.

What changes per job (command, job environment) travels in the RunTask overrides, so the task
definition depends only on the instance type, image, roles and log group. Its family is named by a
hash of its content: an unchanged definition is found and reused instead of registered again.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from airflow_provider_trainium.neuron.catalog import InstanceType, get_instance_type
from airflow_provider_trainium.neuron.container import ContainerShape, container_shape
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.launch import job_environment, preset_environment
from airflow_provider_trainium.neuron.spec import JobSpec

CONTAINER_NAME = "trainer"
LOG_STREAM_PREFIX = "trainium"
FAMILY_PREFIX = "trainium"
#: Seconds between SIGTERM and SIGKILL when a task is stopped (the EC2 maximum): time to flush a checkpoint.
STOP_TIMEOUT_SECONDS = 120
#: AWS caps the RunTask ``overrides`` document at 8192 characters.
MAX_OVERRIDES_CHARS = 8192


@dataclass(frozen=True)
class EcsTaskSettings:
    """What the ``trainium`` connection contributes to a task definition."""

    image: str
    log_group: str
    region_name: str
    execution_role_arn: str | None = None
    task_role_arn: str | None = None


def instance_environment(instance: InstanceType, image: str | None) -> dict[str, str]:
    """The part of :func:`launch.job_environment` every job of this image on this instance type gets (the launch
    presets); the rest of the job's env goes in the overrides, so definition plus overrides is exactly that env."""
    return {**preset_environment(image), "TRAINIUM_INSTANCE_TYPE": instance.name}


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


def container_definition(instance: InstanceType, settings: EcsTaskSettings) -> dict[str, Any]:
    shape = container_shape(instance.name)
    return {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "essential": True,
        "cpu": shape.cpu_units,
        "memory": shape.memory_mib,
        "environment": _name_values(instance_environment(instance, settings.image)),
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


def content_hash(body: dict[str, Any], length: int = 12) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:length]


def task_definition(instance_type: str, settings: EcsTaskSettings) -> dict[str, Any]:
    """RegisterTaskDefinition arguments for ``instance_type``, ``family`` included."""
    instance = get_instance_type(instance_type)
    shape = container_shape(instance.name)
    body: dict[str, Any] = {
        "requiresCompatibilities": ["EC2"],
        "networkMode": "awsvpc",
        "cpu": str(shape.cpu_units),
        "memory": str(shape.memory_mib),
        "placementConstraints": [{"type": "memberOf", "expression": f"attribute:ecs.instance-type == {instance.name}"}],
        "containerDefinitions": [container_definition(instance, settings)],
    }
    if settings.execution_role_arn:
        body["executionRoleArn"] = settings.execution_role_arn
    if settings.task_role_arn:
        body["taskRoleArn"] = settings.task_role_arn
    family = f"{FAMILY_PREFIX}-{instance.name.replace('.', '-')}-{content_hash(body)}"
    return {"family": family, **body}


def container_overrides(spec: JobSpec) -> dict[str, Any]:
    """RunTask ``overrides``: the launcher's arguments (the image's CMD) and the job env not in the definition."""
    base = instance_environment(spec.instance, spec.image)
    env = {k: v for k, v in job_environment(spec).items() if base.get(k) != v}
    command = launcher_arguments(spec)
    return {"containerOverrides": [{"name": CONTAINER_NAME, "command": command, "environment": _name_values(env)}]}


def overrides_size(overrides: dict[str, Any]) -> int:
    return len(json.dumps(overrides, separators=(",", ":")))


def log_stream_name(task_id: str) -> str:
    """The awslogs stream of the training container: ``<prefix>/<container>/<task id>``."""
    return f"{LOG_STREAM_PREFIX}/{CONTAINER_NAME}/{task_id}"
