"""The ``trainium`` connection's settings (``TrainiumConfig``), read from its extras and checked against the
schema its form uses (``trainium_fields``).

Its own module, apart from the hook (``hooks.trainium``), because DAG files import the hook module for
``DEFAULT_CONN_ID`` while they are parsed, and building this many-field frozen dataclass is most of what that
import cost: the config is built when a task runs. ``hooks.trainium`` still exports every name here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_provider_trainium.hooks.trainium_fields import CONN_FIELDS, extras_schema


def check_extra(extra: dict[str, Any]) -> None:
    """Raise ValueError naming every extra that the connection schema (``trainium_fields``) refuses."""
    import jsonschema

    unknown = sorted(set(extra) - set(CONN_FIELDS))
    if unknown:
        raise ValueError(f"trainium connection has unknown extra fields {unknown}; allowed: {sorted(CONN_FIELDS)}")
    validator = jsonschema.Draft202012Validator(extras_schema())
    problems = [
        f"{'.'.join(str(p) for p in err.absolute_path) or 'extra'}: {err.message}"
        for err in sorted(validator.iter_errors(extra), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if problems:
        raise ValueError("trainium connection extras are invalid: " + "; ".join(problems))


def inherited_env_problem(entry: str) -> str | None:
    """Why ``local_inherited_env`` may not name ``entry`` (None when it may): a name by the rule for a task's own
    ``env`` (``neuron.spec.env_name_problem``: nothing that makes the loader, Python or a shell load code, no
    ``AWS_*``, none of the variables the provider sets), a prefix ``P*`` when it could match a name that rule
    refuses. A local job inherits what this allows, so the one denylist holds on both ways in."""
    from airflow_provider_trainium.neuron import spec

    if not entry.endswith("*"):
        problem = spec.env_name_problem(entry, user=True)
        return f"local_inherited_env: {problem}" if problem else None
    prefix = entry[:-1]
    denied_names = spec.ENV_RESERVED | spec.ENV_DENIED_NAMES | spec.USER_ENV_DENIED_NAMES
    clashes = sorted(
        {*(p + "*" for p in spec.USER_ENV_DENIED_PREFIXES if p.startswith(prefix) or prefix.startswith(p)),
         *(n for n in denied_names if n.startswith(prefix))}
    )  # fmt: skip
    if not prefix or clashes:
        return (
            f"local_inherited_env: {entry!r} would pass variables a job may not inherit "
            f"({', '.join(clashes) or 'every variable'}); name the variables one by one"
        )
    return None


def default_artifact_root() -> str:
    home = os.environ.get("AIRFLOW_HOME") or str(Path.home() / "airflow")
    return Path(home, "trainium").resolve().as_uri()


@dataclass(frozen=True)
class TrainiumConfig:
    """What the connection's extras say, with the embedded defaults filled in."""

    configured: bool = False
    aws_conn_id: str = "aws_default"
    region_name: str | None = None
    artifact_root: str = field(default_factory=default_artifact_root)
    ecs_cluster: str | None = None
    ecs_capacity_provider: str | None = None
    ecs_execution_role_arn: str | None = None
    job_role_arn: str | None = None
    batch_job_queues: dict[str, str] = field(default_factory=dict)
    #: Reservation id (``cr-...``) -> where its jobs go: ``batch_job_queue``, ``ecs_cluster`` and
    #: ``ecs_capacity_provider`` of the stack launched into it (``compute.reservations`` reads it).
    capacity_reservations: dict[str, dict[str, str]] = field(default_factory=dict)
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    ecr_repository: str | None = None
    log_group: str | None = None
    image: str | None = None
    #: ``docker``, ``buildah`` or ``codebuild``; unset lets TrainiumImageBuildOperator pick (``auto``).
    image_builder: str | None = None
    #: Prefixes (``s3://bucket/prefix``) a run's ``input_uri``/``base_model`` may read besides the artifact root.
    allowed_input_prefixes: tuple[str, ...] = ()
    #: Prefixes a job's ``output_uri``/``checkpoint_uri``/``code_uri`` may write besides the artifact root
    #: (``neuron.inputs.check_write``); the input prefixes are not writable by being readable.
    allowed_output_prefixes: tuple[str, ...] = ()
    #: Variables of the worker a local-compute job keeps beyond ``compute.local.environment.INHERITED_NAMES``:
    #: names, or prefixes ending in ``*`` (:func:`inherited_env_problem` says which are refused).
    local_inherited_env: tuple[str, ...] = ()
    #: Price overrides (see :mod:`~airflow_provider_trainium.neuron.pricing`) and a JSON file of more.
    prices: dict[str, Any] = field(default_factory=dict)
    prices_file: str | None = None
    #: The ``aws-neuronx-dkms`` version of the hosts of every instance type ``neuron_driver_versions`` does not
    #: name: checked against the image's Neuron runtime before any job starts (:mod:`~.neuron.releases`).
    neuron_driver_version: str | None = None
    #: The driver per instance type (``trn2.48xlarge``) or family (``trn2``): the XLA and native images need
    #: different drivers, so the hosts of each queue or cluster pin their own (``airflow trainium configure``
    #: writes one entry per instance type the stacks run).
    neuron_driver_versions: dict[str, str] = field(default_factory=dict)
    #: Experiment trackers a training run is exported to after it succeeds (``trackers``); None: off.
    mlflow_tracking_uri: str | None = None
    mlflow_experiment: str | None = None
    tensorboard_logdir: str | None = None

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> TrainiumConfig:
        """The config for a connection's extras, checked against the schema the connection form uses."""
        check_extra(extra)
        values: dict[str, Any] = {k: v for k, v in extra.items() if v not in (None, "")}
        for name in (
            "subnets",
            "security_groups",
            "allowed_input_prefixes",
            "allowed_output_prefixes",
            "local_inherited_env",
        ):
            if isinstance(values.get(name), str):
                values[name] = tuple(s.strip() for s in values[name].split(",") if s.strip())
            elif name in values:
                values[name] = tuple(values[name])
        problems = [p for p in map(inherited_env_problem, values.get("local_inherited_env", ())) if p]
        if problems:
            raise ValueError("trainium connection extras are invalid: " + "; ".join(problems))
        if "prices" in values:
            from airflow_provider_trainium.neuron.pricing import parse_prices

            parse_prices(values["prices"], "the trainium connection's prices")  # a clear error now, not mid-run
        return cls(configured=True, **values)

    def _neuron_driver_key(self, instance_type: str) -> str | None:
        """The ``neuron_driver_versions`` key for ``instance_type``: its own entry first, then its family's."""
        for key in (instance_type, instance_type.split(".", 1)[0]):
            if self.neuron_driver_versions.get(key):
                return key
        return None

    def neuron_driver_for(self, instance_type: str) -> str | None:
        """The ``aws-neuronx-dkms`` the hosts of ``instance_type`` run, as far as the connection knows: a driver
        belongs to the hosts of a queue or cluster, so the per-type entry wins over the connection-wide one."""
        key = self._neuron_driver_key(instance_type)
        return self.neuron_driver_versions[key] if key else self.neuron_driver_version

    def neuron_driver_source(self, instance_type: str) -> str | None:
        """Which field :meth:`neuron_driver_for` read, for messages; None when the driver is unknown."""
        key = self._neuron_driver_key(instance_type)
        if key:
            return f"neuron_driver_versions[{key}]"
        return "neuron_driver_version" if self.neuron_driver_version else None
