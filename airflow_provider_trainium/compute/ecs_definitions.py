"""ECS task definitions and RunTask overrides for Trainium, built from a job spec without calling AWS.

ECS has no Neuron resource type: the task maps every ``/dev/neuronN`` of the instance type, adds
``IPC_LOCK`` with an unlimited memlock ulimit (the Neuron runtime pins host memory for DMA), and is
pinned to the instance type by a placement constraint. One task owns the whole instance, so CPU and
memory are the instance's minus what the ECS agent, Docker and the OS keep.

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
from airflow_provider_trainium.neuron.container_contract import launcher_arguments
from airflow_provider_trainium.neuron.launch import BASE_ENV, job_environment
from airflow_provider_trainium.neuron.spec import JobSpec

CONTAINER_NAME = "trainer"
LOG_STREAM_PREFIX = "trainium"
FAMILY_PREFIX = "trainium"
#: CPU units left to the ECS agent, Docker and the Neuron monitor (1024 units = one vCPU).
AGENT_CPU_UNITS = 1024
#: Memory left to the OS and the agent: the larger of this share of the instance and the floor below.
#: ECS registers what the kernel reports (a little under the nominal size), so asking for all of it
#: would never place.
MEMORY_HEADROOM_FRACTION = 0.05
MEMORY_HEADROOM_MIN_MIB = 2048
#: /dev/shm for data loader workers and the XLA runtime: one eighth of the instance memory.
SHARED_MEMORY_FRACTION = 8
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


def task_cpu_units(instance: InstanceType) -> int:
    return instance.vcpus * 1024 - AGENT_CPU_UNITS


def task_memory_mib(instance: InstanceType) -> int:
    """Instance memory minus headroom, rounded down to whole GiB."""
    total = instance.memory_gib * 1024
    headroom = max(MEMORY_HEADROOM_MIN_MIB, int(total * MEMORY_HEADROOM_FRACTION))
    return (total - headroom) // 1024 * 1024


def shared_memory_mib(instance: InstanceType) -> int:
    return instance.memory_gib * 1024 // SHARED_MEMORY_FRACTION


def instance_environment(instance: InstanceType) -> dict[str, str]:
    """Environment every job on this instance type gets; the rest of the job's env goes in overrides."""
    return {**BASE_ENV, "TRAINIUM_INSTANCE_TYPE": instance.name}


def _name_values(env: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": env[k]} for k in sorted(env)]


def container_definition(instance: InstanceType, settings: EcsTaskSettings) -> dict[str, Any]:
    return {
        "name": CONTAINER_NAME,
        "image": settings.image,
        "essential": True,
        "cpu": task_cpu_units(instance),
        "memory": task_memory_mib(instance),
        "environment": _name_values(instance_environment(instance)),
        "linuxParameters": {
            "devices": [
                {"hostPath": path, "containerPath": path, "permissions": ["read", "write"]}
                for path in instance.neuron_devices
            ],
            "capabilities": {"add": ["IPC_LOCK"]},
            "sharedMemorySize": shared_memory_mib(instance),
            "initProcessEnabled": True,
        },
        "ulimits": [
            {"name": "memlock", "softLimit": -1, "hardLimit": -1},
            {"name": "nofile", "softLimit": 65535, "hardLimit": 65535},
        ],
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
    body: dict[str, Any] = {
        "requiresCompatibilities": ["EC2"],
        "networkMode": "awsvpc",
        "cpu": str(task_cpu_units(instance)),
        "memory": str(task_memory_mib(instance)),
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
    base = instance_environment(spec.instance)
    env = {k: v for k, v in job_environment(spec).items() if base.get(k) != v}
    command = launcher_arguments(spec)
    return {"containerOverrides": [{"name": CONTAINER_NAME, "command": command, "environment": _name_values(env)}]}


def overrides_size(overrides: dict[str, Any]) -> int:
    return len(json.dumps(overrides, separators=(",", ":")))


def log_stream_name(task_id: str) -> str:
    """The awslogs stream of the training container: ``<prefix>/<container>/<task id>``."""
    return f"{LOG_STREAM_PREFIX}/{CONTAINER_NAME}/{task_id}"
