"""Every check a first real run depends on, in one list: the CLI prints it, the DAGs' first task raises on it.

The list always holds the same names in the same order (:data:`CHECKS`); a check that does not apply to
the layout says "not needed" and why, and one that depends on a missing connection field says "not checked".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from airflow_provider_trainium.preflight import batch, capacity, ecs, fields, image, network, neuron, storage
from airflow_provider_trainium.preflight.guard import guarded
from airflow_provider_trainium.preflight.layout import Layout
from airflow_provider_trainium.preflight.result import CheckResult, error, ok, warning

if TYPE_CHECKING:
    from airflow_provider_trainium.hooks.trainium_config import TrainiumConfig

CHECKS = (
    "layout",
    "stack",
    "compute",
    "connection",
    "stack outputs",
    "artifact bucket",
    "ecs cluster",
    "batch queue",
    "compute environment",
    "capacity",
    "efa security group",
    "image",
    "neuron driver",
    "instance family",
)
Check = Callable[[], CheckResult]


def resolved_compute(config: TrainiumConfig, compute: str, nodes: int) -> tuple[str | None, CheckResult]:
    from airflow_provider_trainium.compute.backends import AUTO, resolve_compute

    try:
        name = resolve_compute(compute, config, nodes)
    except ValueError as err:
        return None, error("compute", str(err))
    if name == "ecs" and nodes > 1:
        return name, error("compute", f"ecs runs one instance per job, but nodes={nodes}: use batch for multi-node")
    how = f" (auto: {nodes} node(s), trainium connection {'set' if config.configured else 'absent'})"
    return name, ok("compute", name + (how if (compute or AUTO).strip().lower() == AUTO else " (asked for)"))


def remote_checks(config: TrainiumConfig, layout: Layout) -> dict[str, Check]:
    """The checks of a remote layout; one whose input the connection lacks is "not checked" (the connection
    check already names the field as an error)."""

    def not_checked(name: str, field: str) -> Check:
        return lambda: warning(name, f"not checked: the trainium connection has no {field}")

    def not_needed(name: str) -> Check:
        return lambda: ok(name, f"not needed ({layout.compute} compute)")

    queue = config.batch_job_queues.get(layout.instance_type)
    checks: dict[str, Check] = {
        "connection": lambda: fields.check_connection(config, layout),
        "stack outputs": lambda: fields.check_stack_outputs(config, layout),
        "artifact bucket": lambda: storage.check_artifact_bucket(config),
        "ecs cluster": not_needed("ecs cluster"),
        "batch queue": not_needed("batch queue"),
        "compute environment": not_needed("compute environment"),
        "capacity": lambda: capacity.check_capacity(config, layout),
        "efa security group": lambda: network.check_efa_security_groups(config, layout),
        "image": lambda: image.check_image(config, layout),
        "neuron driver": lambda: neuron.check_neuron_driver(config, layout),
        "instance family": lambda: neuron.check_instance_family(layout),
    }
    if layout.compute == "ecs":
        cluster = config.ecs_cluster
        checks["ecs cluster"] = (
            (lambda: ecs.check_ecs_cluster(config)) if cluster else not_checked("ecs cluster", "ecs_cluster")
        )
    if layout.compute == "batch":
        field = f"batch_job_queues[{layout.instance_type}]"
        checks["batch queue"] = (
            (lambda: batch.check_batch_queue(config, layout)) if queue else not_checked("batch queue", field)
        )
        checks["compute environment"] = (
            (lambda: batch.check_compute_environments(config, layout))
            if queue
            else not_checked("compute environment", field)
        )
    if not config.region_name:  # quotas are per region; without one nothing says which account's to read
        checks["capacity"] = not_checked("capacity", "region_name")
    if layout.multi_node and not config.security_groups:
        checks["efa security group"] = not_checked("efa security group", "security_groups")
    return checks


def run_preflight(
    config: TrainiumConfig,
    *,
    instance_type: str,
    nodes: int,
    compute: str,
    image: str | None,
    stack: str = "auto",
    capacity_reservation: str | None = None,
) -> list[CheckResult]:
    """Every check of :data:`CHECKS` for this layout, each ok / warning / error with its reason.

    ``image`` defaults to the connection's; with neither, the DAG is expected to build one. AWS is asked
    only for remote compute, through the amazon provider's hooks with the connection's ``aws_conn_id``.
    With ``capacity_reservation`` the queue or cluster its ``capacity_reservations`` entry names is checked
    (``preflight.reservation``); a reservation without one is the ``connection`` check's error.
    """
    layout_result = guarded("layout", lambda: neuron.check_layout_rules(instance_type, nodes))
    backend, resolved = resolved_compute(config, compute, nodes)
    layout = (
        None
        if backend is None
        else Layout(instance_type, nodes, backend, image or config.image, capacity_reservation or None)
    )
    # a remote run's image carries its stack (and decides ``auto``), as in the operator; local compute has none
    job_image = layout.image if layout is not None and layout.remote else None
    stack_result = guarded("stack", lambda: neuron.check_stack(str(stack or "auto"), instance_type, job_image))
    results = [layout_result, stack_result, resolved]
    if layout is None:
        return results  # every other check depends on the backend
    if not layout.remote:
        return results + [ok(name, "not needed (local compute)") for name in CHECKS[len(results) :]]
    from airflow_provider_trainium.neuron.catalog import CATALOG

    if instance_type not in CATALOG:
        unknown = f"not checked: {instance_type} is not a Trainium instance type"
        return results + [warning(name, unknown) for name in CHECKS[len(results) :]]
    from airflow_provider_trainium.preflight.reservation import routed_config

    try:
        config = routed_config(config, layout)
    except ValueError as err:  # the job would be refused before submit: nothing else is worth asking
        refused = f"not checked: capacity reservation {layout.capacity_reservation} has no route"
        return results + [error("connection", str(err))] + [warning(n, refused) for n in CHECKS[len(results) + 1 :]]
    checks = remote_checks(config, layout)
    return results + [guarded(name, checks[name]) for name in CHECKS[len(results) :]]
