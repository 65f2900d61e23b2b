"""The one container plan: everything a job's container gets, built once per job spec.

Before this module the argv, the container shape, the preset environment and the per-run environment were
each assembled in a different place and met only in the backend. Now :func:`container_plan` builds them
together and every backend only renders the plan in its own words:

- ECS puts ``shape`` and ``preset_environment`` in the task definition, ``command`` and ``run_environment``
  in the RunTask overrides (``compute/ecs/definitions.py``);
- Batch puts the same halves in the job definition and the SubmitJob overrides (``compute/batch/definitions.py``);
- local compute runs ``argv`` with ``environment`` (both halves) on this machine (``compute/local/backend.py``).

The split between the halves is the one both AWS APIs want: what every run of a layout shares goes in the
registered definition (reused from run to run), what one run adds goes in its overrides. A run's own value
for a preset name wins, as the overrides do on ECS and Batch.

The MFU denominator is decided here and nowhere else: ``TRAINIUM_PEAK_FLOPS`` (one NeuronCore's dense BF16
peak) for a job that runs on Trainium hardware, none for local compute, which runs on this machine's CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from airflow_provider_trainium.neuron.catalog import InstanceType
from airflow_provider_trainium.neuron.container import ContainerShape, container_shape
from airflow_provider_trainium.neuron.container_contract import (
    IMAGE_CMD,
    IMAGE_ENTRYPOINT,
    docker_argv,
    launcher_arguments,
)
from airflow_provider_trainium.neuron.launch import layout_environment, run_environment
from airflow_provider_trainium.neuron.spec import JobSpec
from trainium_trainer import boundary

#: The trainer's MFU denominator: FLOP/s of one rank's NeuronCore.
PEAK_FLOPS_ENV = boundary.ENV_PEAK_FLOPS


@dataclass(frozen=True)
class ContainerPlan:
    """One job's container, before any backend writes it down.

    :param command: the launcher's arguments: what ECS and Batch send as ``command`` (the image's CMD).
    :param argv: what every node's container runs: the image's ENTRYPOINT followed by ``command``.
    :param preset_environment: what every run of this layout and image shares (the definitions carry it).
    :param run_environment: what this run adds or changes on top (the overrides carry it).
    :param peak_flops: one NeuronCore's dense BF16 peak for MFU, or None off Trainium hardware.
    """

    spec: JobSpec
    command: tuple[str, ...]
    argv: tuple[str, ...]
    shape: ContainerShape
    preset_environment: Mapping[str, str]
    run_environment: Mapping[str, str]
    peak_flops: float | None

    @property
    def environment(self) -> dict[str, str]:
        """The container's whole environment on top of the image's ENV: presets, then this run's values."""
        return {**self.preset_environment, **self.run_environment}


def peak_flops_per_core(instance: InstanceType) -> float:
    """Dense BF16 peak of one NeuronCore: a torchrun rank's share of the instance."""
    return instance.peak_bf16_tflops * 1e12 / instance.neuron_cores


def container_plan(spec: JobSpec, *, on_trainium: bool = True) -> ContainerPlan:
    """The plan of ``spec``'s containers. ``on_trainium`` is False for a backend that runs the job on this
    machine (local compute), whose MFU would otherwise be reported against hardware it does not use."""
    peak = peak_flops_per_core(spec.instance) if on_trainium else None
    presets = layout_environment(spec)
    if peak is not None:
        presets[PEAK_FLOPS_ENV] = f"{peak:.6g}"
    # the plan alone decides the MFU peak: a value in the job's env never replaces it
    run = {k: v for k, v in run_environment(spec).items() if presets.get(k) != v and k != PEAK_FLOPS_ENV}
    command = tuple(launcher_arguments(spec))
    return ContainerPlan(
        spec=spec,
        command=command,
        argv=tuple(docker_argv(IMAGE_ENTRYPOINT, IMAGE_CMD, command)),
        shape=container_shape(spec.instance_type, spec.nodes),
        preset_environment=presets,
        run_environment=run,
        peak_flops=peak,
    )
