"""The ``trainium`` connection: where jobs run and where artifacts go.

One connection (``trainium_default``) holds what the CloudFormation stack created. Without it,
everything runs on local compute with ``file://$AIRFLOW_HOME/trainium`` as the artifact root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.sdk import BaseHook

DEFAULT_CONN_ID = "trainium_default"


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
    subnets: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    ecr_repository: str | None = None
    log_group: str | None = None
    image: str | None = None
    #: ``docker``, ``buildah`` or ``codebuild``; unset lets NeuronImageBuildOperator pick (``auto``).
    image_builder: str | None = None
    #: Prefixes (``s3://bucket/prefix``) a run's ``input_uri``/``base_model`` may read besides the artifact root.
    allowed_input_prefixes: tuple[str, ...] = ()

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> TrainiumConfig:
        known = {f for f in cls.__dataclass_fields__ if f != "configured"}
        unknown = sorted(set(extra) - known)
        if unknown:
            raise ValueError(f"trainium connection has unknown extra fields {unknown}; allowed: {sorted(known)}")
        values: dict[str, Any] = {k: v for k, v in extra.items() if v not in (None, "")}
        for name in ("subnets", "security_groups", "allowed_input_prefixes"):
            if isinstance(values.get(name), str):
                values[name] = tuple(s.strip() for s in values[name].split(",") if s.strip())
            elif name in values:
                values[name] = tuple(values[name])
        return cls(configured=True, **values)

    def default_compute(self, nodes: int = 1) -> str:
        """``auto`` resolves to local without a connection, else ECS for one node and Batch for more."""
        if not self.configured:
            return "local"
        return "batch" if nodes > 1 else "ecs"


class TrainiumHook(BaseHook):
    """Reads the ``trainium`` connection. Holds no AWS client: backends open the amazon hooks they need."""

    conn_name_attr = "trainium_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "trainium"
    hook_name = "AWS Trainium"

    def __init__(self, trainium_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.trainium_conn_id = trainium_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["host", "schema", "login", "password", "port"],
            "relabeling": {"extra": "Stack outputs (JSON)"},
            "placeholders": {
                "extra": '{"aws_conn_id": "aws_default", "region_name": "us-east-1", '
                '"artifact_root": "s3://bucket/prefix", "ecs_cluster": "...", '
                '"batch_job_queues": {"trn1.32xlarge": "..."}, "subnets": ["subnet-..."], '
                '"security_groups": ["sg-..."], "ecr_repository": "...", "log_group": "..."}'
            },
        }

    def get_config(self) -> TrainiumConfig:
        """The connection's settings; the local defaults when the default connection does not exist."""
        from airflow.exceptions import AirflowNotFoundException

        try:
            conn = self.get_connection(self.trainium_conn_id)
        except AirflowNotFoundException:
            if self.trainium_conn_id != DEFAULT_CONN_ID:
                raise
            return TrainiumConfig()
        return TrainiumConfig.from_extra(conn.extra_dejson)
