"""What a remote run needs the ``trainium`` connection to say, read from the config alone (no AWS call)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, warning
from airflow_provider_trainium.stack import REQUIRED_FIELDS

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

#: Fields every remote backend reads: the base stack's outputs, which ``airflow trainium configure`` requires too.
REMOTE_FIELDS = REQUIRED_FIELDS


def missing_fields(config: TrainiumConfig, layout: Layout) -> list[str]:
    """The connection fields a run of ``layout`` needs and does not have, each with what it must hold."""
    missing = [name for name in REMOTE_FIELDS if not getattr(config, name)]
    if "artifact_root" not in missing and not config.artifact_root.startswith("s3://"):
        missing.append(f"artifact_root on s3:// (it is {config.artifact_root})")
    if layout.compute == "ecs" and not config.ecs_cluster:
        missing.append("ecs_cluster")
    if layout.compute == "batch" and not config.batch_job_queues.get(layout.instance_type):
        missing.append(f"batch_job_queues[{layout.instance_type}]")
    return missing


def check_connection(config: TrainiumConfig, layout: Layout) -> CheckResult:
    missing = missing_fields(config, layout)
    if missing:
        return error("connection", f"{layout.compute} compute needs the trainium connection's {', '.join(missing)}")
    return ok("connection", f"every field {layout.compute} compute reads is set (region {config.region_name})")


def check_stack_outputs(config: TrainiumConfig, layout: Layout) -> CheckResult:
    """The driver of the run's instance type is what ``airflow trainium configure`` copies from the stacks'
    outputs (``neuron_driver_versions``; connections written before it hold one ``neuron_driver_version``)."""
    source = config.neuron_driver_source(layout.instance_type)
    if source is None:
        return warning(
            "stack outputs",
            f"not checked: the trainium connection has no driver for {layout.instance_type} (neuron_driver_versions "
            "or neuron_driver_version, from the stacks' NeuronDriverVersion and NativeNeuronDriverVersion outputs; "
            "run `airflow trainium configure`), so the hosts' driver cannot be compared with the image",
        )
    driver = config.neuron_driver_for(layout.instance_type)
    if source == "neuron_driver_version":
        return ok("stack outputs", f"neuron_driver_version {driver} (NeuronDriverVersion)")
    return ok("stack outputs", f"{source} {driver} (the driver the {layout.instance_type} hosts pin)")
