"""Which registry a task uses: its own arguments first, then the ``trainium`` connection."""

from __future__ import annotations

from airflow_provider_trainium.hooks.trainium import DEFAULT_CONN_ID, TrainiumHook
from airflow_provider_trainium.registry.registry import ModelRegistry


def open_registry(
    artifact_root: str | None = None,
    aws_conn_id: str | None = None,
    trainium_conn_id: str = DEFAULT_CONN_ID,
) -> ModelRegistry:
    """The registry at ``artifact_root`` (default: the connection's, ``file://$AIRFLOW_HOME/trainium``
    without one); object-store roots are reached through ``aws_conn_id`` or the connection's."""
    if artifact_root is None or aws_conn_id is None:
        config = TrainiumHook(trainium_conn_id).get_config()
        artifact_root = artifact_root or config.artifact_root
        aws_conn_id = aws_conn_id or config.aws_conn_id
    local = "://" not in artifact_root or artifact_root.startswith("file://")
    return ModelRegistry(artifact_root, conn_id=None if local else aws_conn_id)
