"""What the Neuron release table says about this run: the layout, the hosts' driver, the instance family.

Pure rules over :mod:`~airflow_provider_trainium.neuron`; a mismatch here would fail at the job's first
device use, after the instances were paid for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig


def check_layout_rules(instance_type: str, nodes: int) -> CheckResult:
    from airflow_provider_trainium.neuron.spec import JobSpecError, check_layout

    try:
        check_layout(instance_type, nodes)
    except JobSpecError as err:
        return error("layout", "; ".join(err.problems))
    return ok("layout", f"{nodes} x {instance_type}")


def check_stack(stack: str, instance_type: str, image: str | None = None) -> CheckResult:
    """Whether the run's ``stack`` (``auto``, ``xla``, ``native``) trains on the instance family, by the release
    table; on local compute too, for the instance type the run stands in for. With the ``image`` a remote run
    gets, ``auto`` resolves as the operator does and the image must carry the stack."""
    from airflow_provider_trainium.neuron.releases import auto_stack, image_stack_problem, stack_problem
    from airflow_provider_trainium.neuron.stack_names import STACK_AUTO

    chosen = auto_stack(instance_type, image) if stack in ("", STACK_AUTO) else stack
    problem = stack_problem(chosen, instance_type) or image_stack_problem(chosen, image)
    if problem:
        return error("stack", problem)
    how = f" (auto on {instance_type}{' and its image' if image else ''})" if chosen != stack else ""
    return ok("stack", f"{chosen}{how}")


def check_neuron_driver(config: TrainiumConfig, layout: Layout) -> CheckResult:
    """The driver of the run's instance type against its image's runtime: a Trn2 queue for the native image and
    a Trn1 one for the XLA image pin different drivers, and each job runs on its own type's hosts."""
    from airflow_provider_trainium.neuron.releases import driver_problem, image_runtime

    name = "neuron driver"
    driver = config.neuron_driver_for(layout.instance_type)
    try:
        problem = driver_problem(layout.image, driver)
    except ValueError as err:  # a release table value that is not a version yet
        return error(name, f"the Neuron release table cannot compare versions: {err} (neuron/releases.toml)")
    if problem:
        return error(name, problem)
    found = image_runtime(layout.image)
    if not driver:
        return warning(
            name,
            f"not checked: the hosts' Neuron driver is unknown (no neuron_driver_versions entry for "
            f"{layout.instance_type} and no neuron_driver_version in the connection); the image carries runtime "
            f"{found.runtime} ({found.how})",
        )
    if found.release is None:
        return warning(name, f"not checked: runtime {found.runtime} ({found.how}) is not in the release table")
    return ok(
        name,
        f"driver {driver} is within {found.release.driver_range}, the drivers runtime "
        f"{found.runtime} accepts; the runtime is {found.how}",
    )


def check_instance_family(layout: Layout) -> CheckResult:
    from airflow_provider_trainium.compute.remote import launch_problem
    from airflow_provider_trainium.neuron.releases import family_problem, image_runtime

    name = "instance family"
    problem = launch_problem(layout.instance_type) or family_problem(layout.image, layout.instance_type)
    if problem:
        return error(name, problem)
    release = image_runtime(layout.image).release
    if release is None:
        return warning(name, f"not checked: the image's runtime is not in the release table ({layout.instance_type})")
    if not release.supported_for_training:
        return warning(
            name,
            f"Neuron {release.version} is {release.training_support} for training by AWS: {release.support_note}",
        )
    return ok(name, f"Neuron {release.version} supports training on {layout.instance_type}")
