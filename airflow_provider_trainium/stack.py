"""From CloudFormation stack outputs to the ``trainium`` connection's extras.

The templates in ``cloudformation/`` name each output that belongs in the connection after a
:class:`TrainiumConfig` field in CamelCase (``ArtifactRoot`` -> ``artifact_root``), so the mapping is derived
from the dataclass and cannot drift. Other outputs (``VpcId``, exports for the other stacks) are not
connection fields and are left out.

The Neuron driver outputs are the exception: a driver belongs to the hosts of one queue or cluster, so they
become ``neuron_driver_versions`` entries for the instance types those hosts are (the Batch stack's queues,
the ECS stack's ``ContainerInstanceType``), not one connection-wide value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from typing import Any

from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig
from airflow_provider_trainium.neuron.catalog import CATALOG

#: Fields that describe the Airflow side, not the stack: they never come from an output. ``capacity_reservations``
#: is set by hand: a stack's reservation is its ``CapacityReservationId`` parameter, not an output; the
#: trackers (MLflow, TensorBoard) are the platform's own services.
NOT_FROM_STACK = frozenset(
    {
        "configured",
        "aws_conn_id",
        "image",
        "image_builder",
        "allowed_input_prefixes",
        "allowed_output_prefixes",
        "local_inherited_env",
        "prices",
        "prices_file",
        "capacity_reservations",
        "mlflow_tracking_uri",
        "mlflow_experiment",
        "tensorboard_logdir",
    }
)

#: Fields built from several outputs (:func:`_driver_fields`), not from the one output of their name.
DERIVED_FIELDS = frozenset({"neuron_driver_version", "neuron_driver_versions"})

#: The Batch stack's driver output per instance family: the parameter its launch template pins (the XLA image's
#: driver on Trn1/Trn1n, the native image's on Trn2/Trn3; tests/integration/cloudformation holds the template to it).
BATCH_DRIVER_OUTPUTS: dict[str, str] = {
    "trn1": "NeuronDriverVersion",
    "trn1n": "NeuronDriverVersion",
    "trn2": "NativeNeuronDriverVersion",
    "trn3": "NativeNeuronDriverVersion",
}
#: The driver output of every compute stack: the ECS stack's for its one instance type, the Batch stack's for Trn1.
DRIVER_OUTPUT = "NeuronDriverVersion"
ECS_INSTANCE_TYPE_OUTPUT = "ContainerInstanceType"

#: What a usable connection needs; all of them are outputs of the base stack.
REQUIRED_FIELDS = (
    "region_name",
    "artifact_root",
    "job_role_arn",
    "ecs_execution_role_arn",
    "subnets",
    "security_groups",
    "ecr_repository",
    "log_group",
)

#: Stack states whose outputs are those of a finished deployment.
USABLE_STATES = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"})


def output_name(field_name: str) -> str:
    """``ecs_execution_role_arn`` -> ``EcsExecutionRoleArn``."""
    return "".join(part.capitalize() for part in field_name.split("_"))


OUTPUT_FIELDS: dict[str, str] = {
    output_name(f.name): f.name for f in fields(TrainiumConfig) if f.name not in NOT_FROM_STACK | DERIVED_FIELDS
}
#: Every output :func:`_driver_fields` reads.
DRIVER_OUTPUTS = frozenset({*BATCH_DRIVER_OUTPUTS.values(), DRIVER_OUTPUT})


def _split_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _parse_job_queues(value: str, stack: str) -> dict[str, str]:
    """``trn1.32xlarge=arn:...,trn2.48xlarge=arn:...`` -> ``{instance_type: queue}``."""
    queues: dict[str, str] = {}
    for pair in _split_list(value):
        instance_type, sep, queue = pair.partition("=")
        instance_type, queue = instance_type.strip(), queue.strip()
        if not sep or not instance_type or not queue:
            raise ValueError(f"stack {stack}: BatchJobQueues entry {pair!r} is not instance_type=queue")
        if instance_type not in CATALOG:
            raise ValueError(
                f"stack {stack}: BatchJobQueues names {instance_type!r}, which is not a Trainium instance type"
            )
        queues[instance_type] = queue
    return queues


def _driver_fields(stack: str, outputs: Mapping[str, str]) -> dict[str, Any]:
    """``neuron_driver_versions`` for the hosts one stack runs: per Batch queue the driver its launch template
    pins, for the ECS cluster its instance type's. A driver output with no instance type to tie it to (a
    template of an older layout) stays the connection-wide ``neuron_driver_version``."""
    from airflow_provider_trainium.neuron.releases import family

    drivers: dict[str, str] = {}
    if "BatchJobQueues" in outputs:
        for instance_type in _parse_job_queues(outputs["BatchJobQueues"], stack):
            output = BATCH_DRIVER_OUTPUTS.get(family(instance_type), DRIVER_OUTPUT)
            if output not in outputs:  # a template from before the native driver pinned one driver everywhere
                output = DRIVER_OUTPUT
            if outputs.get(output):
                drivers[instance_type] = outputs[output]
    elif outputs.get(ECS_INSTANCE_TYPE_OUTPUT) and outputs.get(DRIVER_OUTPUT):
        drivers[outputs[ECS_INSTANCE_TYPE_OUTPUT]] = outputs[DRIVER_OUTPUT]
    if drivers:
        return {"neuron_driver_versions": drivers}
    if outputs.get(DRIVER_OUTPUT):
        return {"neuron_driver_version": outputs[DRIVER_OUTPUT]}
    return {}


def fields_from_outputs(stack: str, outputs: Mapping[str, str]) -> dict[str, Any]:
    """The connection fields one stack's outputs provide, converted to the extras' types."""
    extra: dict[str, Any] = _driver_fields(stack, outputs)
    for key, value in outputs.items():
        name = OUTPUT_FIELDS.get(key)
        if name is None:
            continue
        if name in ("subnets", "security_groups"):
            extra[name] = _split_list(value)
        elif name == "batch_job_queues":
            extra[name] = _parse_job_queues(value, stack)
        else:
            extra[name] = value
    return extra


#: Fields that several stacks add entries to, with what a clash on one key means.
MERGED_MAPS = {
    "batch_job_queues": "both define Batch queues",
    "neuron_driver_versions": "pin different Neuron drivers",
}


def merge_stack_fields(per_stack: Iterable[tuple[str, Mapping[str, str]]]) -> dict[str, Any]:
    """Merge the fields of several stacks (base, ECS, Batch); stacks that disagree on a field are an error.

    The per-instance-type maps add up: two stacks may run different types, not give one type two values."""
    merged: dict[str, Any] = {}
    source: dict[str, str] = {}
    for stack, outputs in per_stack:
        for name, value in fields_from_outputs(stack, outputs).items():
            if name in MERGED_MAPS and name in merged:
                clash = sorted(k for k in value if k in merged[name] and merged[name][k] != value[k])
                if clash:
                    raise ValueError(f"stacks {source[name]} and {stack} {MERGED_MAPS[name]} for {clash}")
                merged[name] = {**merged[name], **value}
                source[name] = f"{source[name]}, {stack}"
                continue
            if name in merged and merged[name] != value:
                raise ValueError(
                    f"stacks {source[name]} and {stack} disagree on {output_name(name)}: {merged[name]!r} != {value!r}"
                )
            merged[name] = value
            source[name] = stack
    return merged


def connection_extra(
    per_stack: Sequence[tuple[str, Mapping[str, str]]], aws_conn_id: str, image: str | None = None
) -> dict[str, Any]:
    """The ``trainium`` connection's extras for these stacks, checked by :meth:`TrainiumConfig.from_extra`."""
    merged = merge_stack_fields(per_stack)
    names = ", ".join(stack for stack, _ in per_stack)
    missing = [output_name(name) for name in REQUIRED_FIELDS if name not in merged]
    if missing:
        raise ValueError(f"stacks {names} have no outputs {missing}: include the base stack (cloudformation/base.yaml)")
    extra: dict[str, Any] = {"aws_conn_id": aws_conn_id, **merged}
    if image:
        extra["image"] = image
    TrainiumConfig.from_extra(extra)
    return extra


def read_stack_outputs(stack: str, aws_conn_id: str, region_name: str | None = None) -> dict[str, str]:
    """Outputs of a deployed stack, read through the amazon provider's CloudFormation hook."""
    from airflow.providers.amazon.aws.hooks.cloud_formation import CloudFormationHook
    from botocore.exceptions import ClientError

    hook = CloudFormationHook(aws_conn_id=aws_conn_id, region_name=region_name)
    try:
        found = hook.conn.describe_stacks(StackName=stack)["Stacks"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") == "ValidationError":
            raise ValueError(
                f"stack {stack} not found in region {hook.conn_region_name} (connection {aws_conn_id})"
            ) from err
        raise
    status = found[0]["StackStatus"]
    if status not in USABLE_STATES:
        raise ValueError(f"stack {stack} is {status}; its outputs are usable once it is one of {sorted(USABLE_STATES)}")
    return {out["OutputKey"]: out["OutputValue"] for out in found[0].get("Outputs", [])}
